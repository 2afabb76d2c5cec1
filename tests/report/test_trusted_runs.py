"""`compare` and `recommend` on runs that carry validity verdicts, host hashes and both peak
memory figures: logged through MlflowClient into the test store, the commands run in-process."""

from __future__ import annotations

import json
import time
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from click.testing import CliRunner, Result
from mlflow.entities import Metric, Param

from mlflow_dlaas.cli import cli
from mlflow_dlaas.runs.schema import PEAK_MEMORY, REASON_TAG, TRAIN_TIME

HOST_A, HOST_B = "aaaaaaaaaaaa", "bbbbbbbbbbbb"
BUSY = "other processes used {:.2f} of 2 cores during train (limit 0.25)"


def _log(experiment: str, system: str, times: list[float], *, host: str = HOST_A,
         validity: list[str | None] | None = None, measured_mb: float | None = None,
         tree_mb: float = 400.0, model: str | None = None) -> list[str]:
    """One finished training run per value of ``times`` (seeds 0, 1, ...)."""
    client = mlflow.MlflowClient()
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    now = int(time.time() * 1000)
    ids = []
    for seed, value in enumerate(times):
        verdict = (validity or ["valid"] * len(times))[seed]
        tags = {"dlaas.entry": "train", "dlaas.framework": system, "dlaas.host": host,
                "dlaas.env.cpu_model": f"CPU {host[0].upper()}"}
        if verdict:
            reason = BUSY.format(0.5 + seed) if verdict == "disturbed" else "quiet"
            tags.update({"dlaas.validity": verdict, "dlaas.validity_reason": reason})
        metrics = {TRAIN_TIME: value, "run/peak_proc_rss_megabytes": tree_mb}
        if measured_mb is not None:
            metrics[PEAK_MEMORY] = measured_mb
        run = client.create_run(experiment_id, run_name=f"{system}-{seed}", tags=tags)
        client.log_batch(run.info.run_id,
                         metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
                         params=[Param("seed", str(seed)),
                                 *([Param("model", model)] if model else [])])
        client.set_terminated(run.info.run_id, "FINISHED")
        ids.append(run.info.run_id)
    return ids


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _recommend(experiment: str, *args: str) -> dict:
    done = _invoke("recommend", "--experiment", experiment, "--objective", "train_time",
                   "--json", *args)
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    (only,) = answer["answers"]  # one workload
    return {**only, "host": answer["host"], "notes": answer["notes"]}


def _compare(experiment: str, out: Path, *args: str) -> str:
    done = _invoke("compare", "--experiment", experiment, "--output", str(out), "--no-run",
                   "--objective", "train_time", *args)
    assert done.exit_code == 0, done.output
    return (out / "report.md").read_text()


def test_disturbed_runs_decide_no_winner_unless_included(tracking: str, tmp_path: Path) -> None:
    fast = _log(tracking, "pytorch", [1.0, 1.1, 1.2, 1.3],
                validity=["disturbed", "disturbed", "valid", "valid"])
    _log(tracking, "tensorflow", [2.0, 2.1, 2.2, 2.3])

    answer = _recommend(tracking)
    assert answer["best"]["system"] == "pytorch" and answer["verdict"] == "open"
    assert "; too few runs to tell it from the next best (tensorflow) (2 vs 4; 4 a side needed)" \
        "; about 8 more rounds of mlflow-dlaas decide (about " in answer["answer"]
    assert {e["run_id"] for e in answer["evidence"]} == set(fast[2:])
    (note,) = answer["notes"]
    assert note == ("Left out: 2 disturbed runs (in all 2: other processes used 0.50–1.50 of 2 "
                    "cores (limit 0.25) during train). Add --include-disturbed to keep them.")
    report = _compare(tracking, tmp_path / "default")
    assert "| pytorch | 2 |" in report and "Left out: 2 disturbed runs" in report
    assert "Left out: 2 disturbed runs" in (tmp_path / "default" / "report.html").read_text()
    assert "ahead of" not in report

    counted = _recommend(tracking, "--include-disturbed")
    assert counted["verdict"] == "winner" and "ahead of the next best" in counted["answer"]
    assert {e["run_id"] for e in counted["evidence"]} == set(fast)
    assert counted["notes"][0].startswith("Kept with --include-disturbed: 2 ")
    report = _compare(tracking, tmp_path / "included", "--include-disturbed")
    assert "| pytorch | 4 |" in report and "ahead of the next best" in report


def test_runs_of_two_hosts_are_never_pooled(tracking: str, tmp_path: Path) -> None:
    a = _log(tracking, "pytorch", [1.0, 1.1, 1.2, 1.3])
    _log(tracking, "tensorflow", [2.0, 2.1, 2.2, 2.3])
    # host B: tensorflow is the faster there; its pytorch runs predate validity verdicts
    _log(tracking, "pytorch", [3.0, 3.1, 3.2, 3.3], host=HOST_B, validity=[None] * 4)
    b = _log(tracking, "tensorflow", [2.5, 2.6, 2.7, 2.8], host=HOST_B)

    answer = _recommend(tracking)
    assert answer["host"] == HOST_A and answer["best"]["system"] == "pytorch"
    assert {e["run_id"] for e in answer["evidence"]} == set(a)  # 4 runs, not host B's too
    assert answer["verdict"] == "winner"
    assert answer["notes"][0].startswith(f"Judged on host {HOST_A} (CPU A), the host with the "
                                         f"most valid runs (8)")
    on_b = _recommend(tracking, "--host", HOST_B)
    assert on_b["host"] == HOST_B and on_b["best"]["system"] == "tensorflow"
    assert {e["run_id"] for e in on_b["evidence"]} == set(b)
    assert "too few runs to tell it from the next best (pytorch) (4 vs 0; 4 a side needed)" \
        in on_b["answer"]  # B's pytorch: unverified
    missing = _invoke("recommend", "--experiment", tracking, "--objective", "train_time",
                      "--host", "cccccccccccc")
    assert missing.exit_code == 2 and "no finished runs on host 'cccccccccccc'" in missing.output

    report = _compare(tracking, tmp_path)
    sections = report.split(f"## Host {HOST_A} · CPU A")[1].split(f"## Host {HOST_B} · CPU B")
    assert len(sections) == 2, "one section per host, the one with more valid runs first"
    for section in sections:
        assert "### Training" in section and "| pytorch | 4 |" in section
        assert "| 8 |" not in section
    assert ", 1.14 s (geometric mean of 4 valid runs" in sections[0]
    assert "tensorflow" in sections[1].split("### Training")[0]  # each host's answer its own
    html = (tmp_path / "report.html").read_text()
    assert html.count("<h2 id='host-") == 2 and html.count("<h3>Training</h3>") == 2
    stats = pd.read_csv(tmp_path / "training_stats.csv", dtype={"host": str})
    assert sorted(zip(stats["host"], stats["system"], stats["runs"], strict=True)) == [
        (HOST_A, "pytorch", 4), (HOST_A, "tensorflow", 4),
        (HOST_B, "pytorch", 4), (HOST_B, "tensorflow", 4)]


@pytest.mark.parametrize("objective", ["peak_memory", "peak_rss"])
def test_memory_is_the_frameworks_own_peak(tracking: str, tmp_path: Path, objective: str) -> None:
    _log(tracking, "pytorch", [1.0, 1.1, 1.2, 1.3], measured_mb=100, tree_mb=400)
    _log(tracking, "tensorflow", [2.0, 2.1, 2.2, 2.3], tree_mb=300)  # an older run: tree only
    done = _invoke("recommend", "--experiment", tracking, "--objective", objective, "--json")
    assert done.exit_code == 0, done.output
    best = json.loads(done.stdout)["answers"][0]["best"]
    assert best["system"] == "pytorch"  # 100 MB, not its tree's 400
    report = _compare(tracking, tmp_path)
    heading = next(line for line in report.splitlines() if line.startswith("| system |"))
    column = heading.split(" | ").index("peak memory (MB)")
    rows = {line.split(" | ")[0]: line.split(" | ")[column].split()[0]  # median [IQR]
            for line in report.splitlines()
            if line.startswith(("| pytorch |", "| tensorflow |"))}
    assert rows == {"| pytorch": "100", "| tensorflow": "300"}
    assert "Peak memory of 4 runs is their whole process tree's" in report


def test_compare_with_every_run_disturbed_says_why_in_one_line_and_exits_1(
    tracking: str, tmp_path: Path
) -> None:
    _log(tracking, "pytorch", [1.0, 1.1], validity=["disturbed", "disturbed"])
    done = CliRunner().invoke(cli, ["compare", "--experiment", tracking, "--output",
                                    str(tmp_path / "report"), "--no-run"])
    assert done.exit_code == 1
    # the error is one line (after where runs are tracked, said once a process)
    (line,) = [x for x in done.stderr.splitlines() if not x.startswith("mlflow-dlaas: t")]
    assert line.startswith("mlflow-dlaas: error: nothing to compare: all 2 finished runs were "
                           "disturbed by other work on this machine (in all 2: other "
                           "processes used")
    assert "add --include-disturbed to compare them anyway" in line
    assert not (tmp_path / "report").exists()
    kept = CliRunner().invoke(cli, ["compare", "--experiment", tracking, "--output",
                                    str(tmp_path / "report"), "--no-run",
                                    "--include-disturbed"])
    assert kept.exit_code == 0, kept.output
    assert "Kept with --include-disturbed: 2 disturbed runs" in \
        (tmp_path / "report" / "report.html").read_text()


def test_under_mlflow_run_the_launcher_run_gets_the_reason(tracking: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """``mlflow run . -e compare``: MLflow ends its own run FAILED when compare exits 1; that
    run says why, as every failed run does."""
    _log(tracking, "pytorch", [1.0, 1.1], validity=["disturbed", "disturbed"])
    launcher = mlflow.MlflowClient().create_run(
        mlflow.get_experiment_by_name(tracking).experiment_id).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", launcher)
    done = CliRunner().invoke(cli, ["compare", "--experiment", tracking, "--output",
                                    str(tmp_path / "report"), "--no-run"])
    assert done.exit_code == 1
    reason = mlflow.MlflowClient().get_run(launcher).data.tags[REASON_TAG]
    assert reason.startswith("nothing to compare: all 2 finished runs were disturbed")


def test_two_models_get_one_answer_each_in_recommend_and_the_report(tracking: str,
                                                                    tmp_path: Path) -> None:
    """LeNet-5 and ResNet-50 in one experiment: never ranked against each other."""
    lenet = _log(tracking, "pytorch", [1.0, 1.1, 1.2, 1.3], model="lenet5")
    _log(tracking, "tensorflow", [2.0, 2.1, 2.2, 2.3], model="lenet5")
    _log(tracking, "pytorch", [90.0, 91.0, 92.0, 93.0], model="resnet50")
    resnet = _log(tracking, "tensorflow", [50.0, 51.0, 52.0, 53.0], model="resnet50")
    done = _invoke("recommend", "--experiment", tracking, "--objective", "train_time", "--json")
    assert done.exit_code == 0, done.output
    answers = json.loads(done.stdout)["answers"]
    assert [a["workload"] for a in answers] == ["train · lenet5", "train · resnet50"]
    assert {e["run_id"] for e in answers[0]["evidence"]} == set(lenet)
    assert {e["run_id"] for e in answers[1]["evidence"]} == set(resnet)
    for answer in answers:
        assert [r["settings"]["system"] for r in answer["runners_up"]] != []
        assert answer["against_next_best"]["verdict"] == "better"
        assert len(answer["against_next_best"]["ci95"]) == 2
    report = _compare(tracking, tmp_path)
    assert "## Recommendations: train · lenet5" in report
    assert "## Recommendations: train · resnet50" in report


def test_compare_with_nothing_to_compare_is_exit_1_and_logs_nothing(
        tracking: str, tmp_path) -> None:
    """An empty experiment exited 0 and logged a report run into it."""
    import mlflow
    from click.testing import CliRunner

    from mlflow_dlaas.cli import cli

    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name(tracking)
    out = CliRunner().invoke(cli, ["compare", "--experiment", tracking,
                                   "--output", str(tmp_path / "report")])
    assert out.exit_code == 1, out.output
    assert "nothing to compare: experiment" in out.output and "no finished measured run" \
        in out.output
    assert client.search_runs([experiment.experiment_id]) == []
    assert not (tmp_path / "report").exists()


NOTHING = "mlflow-dlaas: error: nothing to compare: experiment empty holds no finished"
UNKNOWN = "mlflow-dlaas: error: no trial runs of study 'no-such-study'; studies here: none"


@pytest.mark.parametrize(("command", "code", "said"), (
    ("mlflow-dlaas compare --experiment empty --no-run", 1, NOTHING),
    ("mlflow-dlaas recommend --experiment empty --objective train_time", 1, NOTHING),
    ("mlflow-dlaas compare --study no-such-study", 2, UNKNOWN),  # a wrong name: bad input
    ("mlflow-dlaas recommend --study no-such-study --objective p50_latency", 2, UNKNOWN)))
def test_every_comparing_command_with_nothing_to_compare_says_one_line(
        tmp_path, command: str, code: int, said: str) -> None:
    """One contract: nothing to compare is exit 1, one line saying what to run, nothing
    logged or written (the store is not announced: no run goes into it); a study name that
    names none is bad input (exit 2), one line too."""
    from tests.conftest import run_as_user

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client.create_experiment("empty")
    done = run_as_user(command, tmp_path, timeout=120)
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == code, lines
    assert len(lines) == 1 and lines[0].startswith(said), lines
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert runs == [] and not (tmp_path / "dlaas-reports").exists()
