"""The main job, as the README tells every user to run it first: ``make demo`` (which runs
``mlflow-dlaas demo``) on a fresh store in a fresh folder, and what it leaves behind."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from mlflow_dlaas.demo import (
    DEMO_EXPERIMENT,
    REMEASURE_DISTURBED,
    REPLICATES,
    REPORT_DIR,
    SEARCH,
    SERVING,
    TRAIN,
    TRAIN_FRAMEWORKS,
)
from mlflow_dlaas.environment import version_in
from mlflow_dlaas.libraries.settings import LIBRARY_SETTINGS
from mlflow_dlaas.report.collect import collect_runs
from mlflow_dlaas.report.libraries import libraries_table
from mlflow_dlaas.report.publish import write_report
from mlflow_dlaas.report.report import TABLE_BUILDERS, Workloads, build_report
from mlflow_dlaas.report.tables import STATS_CONTRACT
from tests.conftest import CommandResult, run_as_user, user_folder
from tests.workloads.projects import assert_trained_lenet5

pytestmark = pytest.mark.slow
#: The tables of a user's own project (``project:`` studies), and of precisions against
#: fp32: the demo runs neither (tests/own_project, tests/report/test_precision_tables.py and
#: tests/workloads/test_training_precision.py check them on runs that do).
PROJECT_TABLES = ("Project table", "Project parallel libraries table")
PRECISION_TABLES = ("Precision in training table", "Precision in inference table")
ABSENT_TABLES = PROJECT_TABLES + PRECISION_TABLES


def _report(demo: CommandResult) -> Path:
    return demo.folder / REPORT_DIR


def _measured_runs(demo: CommandResult) -> list[mlflow.entities.Run]:
    client = mlflow.MlflowClient(tracking_uri=demo.store)
    experiment = client.get_experiment_by_name(DEMO_EXPERIMENT)
    return [r for r in client.search_runs([experiment.experiment_id], max_results=1000)
            if r.data.tags.get("dlaas.entry") in ("train", "infer")]


def _compared_all(demo: CommandResult) -> bool:
    """Whether the demo compared every run, disturbed ones included: where other work left
    its valid runs nothing to compare (none, or one configuration), it does, and says so."""
    return "the demo's report compares them, marked disturbed" in demo.stderr


def _kept_runs(demo: CommandResult) -> list[mlflow.entities.Run]:
    """The demo's measured runs its report compares: on a busy machine (CI shares one) runs
    are judged disturbed and left out; where the rest compare nothing, the demo compares
    them all and says so."""
    measured = _measured_runs(demo)
    if _compared_all(demo):
        return measured
    return [r for r in measured if r.data.tags.get("dlaas.validity") != "disturbed"]


def _expected_tables(demo: CommandResult) -> dict[str, str]:
    """Title prefix -> statistics CSV, for every table the demo's kept runs call for."""
    kept = _kept_runs(demo)
    entries = {r.data.tags["dlaas.entry"] for r in kept}
    tables = {}
    if "train" in entries:
        tables["Training"] = "training_stats.csv"
        changed = {r.data.params.get(s, "default") not in ("", "default")
                   for r in kept if r.data.tags["dlaas.entry"] == "train"
                   for s in set(SEARCH) & set(LIBRARY_SETTINGS)}
        if changed == {True, False}:  # a library setting and its default: that table too
            tables["Parallel libraries"] = "parallel_stats.csv"
    if "infer" in entries:
        tables["Inference"] = "inference_stats.csv"
        tables["Scenarios per run"] = "scenarios_stats.csv"  # the demo serves with a server
    return tables


def test_the_demo_exits_0_without_a_traceback(demo: CommandResult) -> None:
    """Runs first in the demo's group, so its setup is the demo itself (``make demo`` as a
    user runs it: 10 to 25 minutes on 2 cores in the suite), whose cost is its point."""
    assert demo.returncode == 0, demo.stderr[-4000:]
    for stream in (demo.stdout, demo.stderr):
        assert "Traceback" not in stream, stream[-4000:]


def test_the_demo_writes_every_report_file(demo: CommandResult) -> None:
    report = _report(demo)
    for name in ("report.html", "report.md", "runs.csv", *_expected_tables(demo).values()):
        assert (report / name).is_file() and (report / name).stat().st_size, name
    plots = sorted((report / "plots").glob("*.png"))
    entries = {r.data.tags["dlaas.entry"] for r in _kept_runs(demo)}
    expected = {"resource_timelines.png", "fraction_of_peak.png"}  # what the kept runs call for
    if "train" in entries:
        expected |= {"accuracy_vs_train_time.png", "time_to_accuracy.png"}
    if "infer" in entries:
        expected |= {"inference_vs_batch_size.png", "latency_cdf.png"}
    assert expected <= {p.name for p in plots}, [p.name for p in plots]
    html = (report / "report.html").read_text()
    assert html.count("<img") == len(plots)
    runs = pd.read_csv(report / "runs.csv")
    for name in _expected_tables(demo).values():
        stats = pd.read_csv(report / name)
        assert set(STATS_CONTRACT) <= set(stats.columns), name
        for run_ids in stats["run_ids"]:
            assert set(run_ids.split(",")) <= set(runs["run_id"])


def test_the_report_has_every_section_the_runs_call_for(demo: CommandResult) -> None:
    html = (_report(demo) / "report.html").read_text()
    assert "Could not be built" not in html
    expected = _expected_tables(demo)
    for title in expected:
        assert re.search(rf"<h2[^>]*>{re.escape(title)}", html), title
    kept = _kept_runs(demo)
    if _compared_all(demo):  # a busy machine: compared anyway, and said so
        assert "nothing to compare: all" in demo.stderr
        assert "Kept with --include-disturbed" in html
    # a busy machine may leave only the study's runs undisturbed: its answers then stand alone
    assert re.search(r"<h2>Recommendations: (study [^<·]+ · )?(train|infer) · lenet5[^<]*</h2>",
                     html)
    assert "Plots</h2>" in html
    table_text = re.sub(r"<[^>]+>", " ", html)
    for run in kept:
        assert run.data.tags.get("dlaas.framework", run.data.tags.get("dlaas.runtime", "")) \
            in table_text


def _prints_its_answer(done: CommandResult) -> None:
    """The recommendations (where every run was disturbed, over all of them)."""
    assert "## Recommendations" in done.stdout
    assert re.search(r"^- \*\*.+\*\*$", done.stdout, re.MULTILINE), done.stdout[-3000:]


def test_the_demo_prints_its_recommendations_and_where_to_look(demo: CommandResult) -> None:
    _prints_its_answer(demo)
    assert f"demo: report: {(_report(demo) / 'report.html').resolve()}" in demo.stderr
    assert "mlflow ui --backend-store-uri sqlite:///" in demo.stderr


def test_the_demo_leaves_no_run_running(demo: CommandResult) -> None:
    client = mlflow.MlflowClient(tracking_uri=demo.store)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, max_results=1000)
    assert len(runs) >= len(TRAIN_FRAMEWORKS) + len(SERVING)
    assert {r.info.status for r in runs} == {"FINISHED"}, [
        (r.info.run_name, r.info.status) for r in runs if r.info.status != "FINISHED"]


def test_every_table_builder_keeps_the_statistics_contract(demo: CommandResult,
                                                           tmp_path: Path) -> None:
    """Every section builder on the demo's real runs, then the whole report written again."""
    client = mlflow.MlflowClient(tracking_uri=demo.store)
    table = collect_runs(client, experiment=DEMO_EXPERIMENT, study=None)
    work = Workloads.of(table.finished)
    built = {name: build(work) for name, build in TABLE_BUILDERS if name not in ABSENT_TABLES}
    assert all(t is not None for t in built.values()), built  # the demo calls for each one
    assert all(build(work) is None for name, build in TABLE_BUILDERS if name in ABSENT_TABLES)
    for name, section_table in built.items():
        assert set(STATS_CONTRACT) <= set(section_table.stats.columns), name
        assert all(ids for ids in section_table.stats["run_ids"]), name
    mlflow.set_tracking_uri(demo.store)
    report = build_report(client, table, demo.store, include_disturbed=True)  # busy or not
    written = write_report(report, tmp_path)
    assert written.failures == ()
    assert {p.name for p in written.files} >= {"report.html", "report.md", "runs.csv",
                                               "training_stats.csv", "parallel_stats.csv",
                                               "inference_stats.csv", "scenarios_stats.csv"}


def test_the_libraries_table_compares_like_with_like_with_intervals(demo: CommandResult
                                                                   ) -> None:
    """Each library setting against its default within the study's cells (threads and the
    other library held), both sides' runs listed, every decided verdict with its interval."""
    stats_file = _report(demo) / "parallel_stats.csv"
    client = mlflow.MlflowClient(tracking_uri=demo.store)
    if stats_file.is_file():
        stats = pd.read_csv(stats_file, dtype=str, keep_default_na=False)
    else:  # every study trial disturbed (a busy machine): the table over every run instead
        train = Workloads.of(collect_runs(client, experiment=DEMO_EXPERIMENT).finished).train
        table = libraries_table(train)
        assert table is not None, "the demo's study changed no library setting"
        stats = table.stats_csv().astype(str)
    for _, row in stats.iterrows():
        if not row["run_ids"]:
            continue
        sides = [[client.get_run(r) for r in row[c].split(",")]
                 for c in ("run_ids", "default_run_ids")]
        for side in sides:  # one workload: the study's one-epoch LeNet-5
            assert {r.data.params["epochs"] for r in side} == {"1"}, row["setting"]
        cells = [Counter(tuple(sorted((k, v) for k, v in r.data.params.items()
                                      if k in SEARCH and k != row["setting"])) for r in side)
                 for side in sides]
        assert set(cells[0]) == set(cells[1]), row["setting"]  # the same cells on both sides
        verdict = row["Headline/train_time_seconds|verdict"]
        assert verdict in ("better", "worse", "no meaningful difference", "not separable",
                           "too few runs"), verdict
        if verdict != "too few runs":
            assert float(row["Headline/train_time_seconds|ci_low"]) <= float(
                row["Headline/train_time_seconds|ratio"]) <= float(
                row["Headline/train_time_seconds|ci_high"])


def test_reproduce_writes_its_claims_report_on_the_demo_store(demo: CommandResult) -> None:
    """A store that holds no claim's study: the claims report still writes, and says why."""
    done = run_as_user("mlflow-dlaas reproduce --claims 8 --no-run --output claims",
                       demo.folder, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "claim 8: " in done.stdout
    assert (demo.folder / "claims" / "claims.html").is_file()


def _screened_out(demo: CommandResult) -> set[str]:
    """The runtimes the demo left out of its later serving rounds, as its log names them."""
    found = re.search(r"demo: the later serving rounds measure only .+?: (.+?) at least",
                      demo.stderr)
    return set(found.group(1).split(", ")) if found else set()


def test_the_demo_measures_each_configuration_enough_times(demo: CommandResult) -> None:
    """:data:`REPLICATES` runs of every training configuration and of each serving one still
    in the running after the first half of the rounds (half as many of one left behind), so
    that on a quiet machine its recommendations reach a verdict (not "repeat the runs")."""
    measured = _measured_runs(demo)
    configs = Counter((r.data.tags["dlaas.entry"], r.data.tags.get(
        "dlaas.framework", r.data.tags.get("dlaas.runtime")),
        r.data.params.get("intra_op_threads", "default")) for r in measured
        if r.data.tags.get("dlaas.study") is None)
    assert len(configs) == len(TRAIN_FRAMEWORKS) + len(SERVING), configs
    screened = _screened_out(demo)
    assert len(screened) < len(SERVING)  # the leader is measured every round
    expected = {c: REPLICATES // 2 if c[0] == "infer" and c[1] in screened else REPLICATES
                for c in configs}
    extra = sum(n - expected[c] for c, n in configs.items())  # disturbed runs measured again
    assert all(n >= expected[c] for c, n in configs.items()), configs
    assert extra <= REMEASURE_DISTURBED, configs
    disturbed = sum(r.data.tags.get("dlaas.validity") == "disturbed" for r in measured
                    if r.data.tags.get("dlaas.study") is None)
    assert extra <= disturbed, configs
    if not any(r.data.tags.get("dlaas.validity") == "disturbed" for r in measured):
        assert "measure more replicates" not in demo.stdout, demo.stdout[-3000:]


def _configured_runs(demo: CommandResult, entry: str) -> list[mlflow.entities.Run]:
    """The demo's training or serving runs (its study's trials apart)."""
    return [r for r in _measured_runs(demo)
            if r.data.tags["dlaas.entry"] == entry and r.data.tags.get("dlaas.study") is None]


def test_the_demo_trains_lenet5_past_90_percent_on_every_framework(demo: CommandResult
                                                                   ) -> None:
    """Each framework's training runs (MXNet's in its own virtualenv, numpy 1.23): accuracy,
    one parameter count, every headline figure, FLOPs and the peak, the served run's model
    logged in its own flavor (only that run's) and, from PyTorch and MXNet, every run's ONNX
    export for the other runtimes."""
    client = mlflow.MlflowClient(tracking_uri=demo.store)
    trained = _configured_runs(demo, "train")
    assert {r.data.tags["dlaas.framework"] for r in trained} == set(TRAIN_FRAMEWORKS)
    served = {r.data.params["model_uri"].removeprefix("runs:/")
              for r in _configured_runs(demo, "infer")}
    for run in trained:
        framework = run.data.tags["dlaas.framework"]
        assert_trained_lenet5(client, run, framework, epochs=TRAIN["epochs"])
        logged = run.data.params["log_model"] == "True"
        # a logged model not served: its run was disturbed and measured once more
        assert logged == (run.info.run_id in served) or \
            run.data.tags.get("dlaas.validity") == "disturbed", run.info.run_id
        assert run.data.tags.get("dlaas.model_flavor") == (None if not logged else
            "artifact (mxnet symbol + params)" if framework == "mxnet" else f"mlflow.{framework}")
        if framework in ("pytorch", "mxnet"):
            assert run.data.tags["dlaas.onnx"] == "onnx/model.onnx"
        else:
            assert run.data.tags["dlaas.onnx"].startswith("not exported")
    mxnet = [r for r in trained if r.data.tags["dlaas.framework"] == "mxnet"]
    assert all(version_in(r.data.tags, "numpy").startswith("1.23") for r in mxnet)


def test_the_demo_studys_thread_counts_are_read_back_not_echoed(demo: CommandResult) -> None:
    trials = [r for r in _measured_runs(demo) if r.data.tags.get("dlaas.study")]
    assert {r.data.params["intra_op_threads"] for r in trials} == {"1", "2"}
    for trial in trials:
        assert trial.data.params["in_force_intra_op_threads"] == \
            trial.data.params["intra_op_threads"]


def test_the_demo_serves_every_trained_model_and_checks_it_against_its_framework(
        demo: CommandResult) -> None:
    """Each runtime serves the model the demo trained for it (MXNet's in its virtualenv;
    ONNX Runtime and OpenVINO PyTorch's export), its outputs checked against the framework
    that trained it before any timing."""
    trained = {(r.data.tags["dlaas.framework"], r.info.run_id)
               for r in _configured_runs(demo, "train")}
    served = _configured_runs(demo, "infer")
    assert {r.data.tags["dlaas.runtime"] for r in served} == {s[0] for s in SERVING}
    sources = {runtime: source for runtime, source, _ in SERVING}
    for run in served:
        source = sources[run.data.tags["dlaas.runtime"]]
        assert run.info.status == "FINISHED"
        assert run.data.params["reference_framework"] == source
        assert (source, run.data.params["model_uri"].removeprefix("runs:/")) in trained
        assert run.data.metrics["equivalence/max_abs_error"] < 1e-3
        assert run.data.metrics["offline/throughput_samples_per_second"] > 0
        assert run.data.tags["dlaas.model_source"] == "training_run"
        # the model by its name, the run it came from beside it (the UI's description)
        assert "Inference: lenet5 (trained in run-" in run.data.tags["mlflow.note.content"]


def test_mlflow_run_of_the_checkout_runs_the_main_job(tmp_path_factory) -> None:
    """``mlflow run .``, what MLflow users try first: the root MLproject's main entry point
    is the demo, under a launcher run that ends FINISHED like every other. Here with one
    replicate of TensorFlow's part (a training and a serving run, 40 s): the ``demo`` fixture
    runs the whole demo, and its PyTorch part (with its study) would add minutes to
    the suite without testing more of the MLproject's wiring."""
    done = run_as_user("mlflow run . -P replicates=1 -P frameworks=tensorflow --env-manager local",
                       user_folder(tmp_path_factory, "main"), timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stdout + done.stderr
    assert (done.folder / REPORT_DIR / "report.html").is_file()
    _prints_its_answer(done)
    client = mlflow.MlflowClient(tracking_uri=done.store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              max_results=1000)
    assert {r.info.status for r in runs} == {"FINISHED"}
    launcher = [r for r in runs if r.data.tags.get("mlflow.project.entryPoint") == "main"]
    assert len(launcher) == 1
    measured = {r.data.tags.get("dlaas.framework", r.data.tags.get("dlaas.runtime"))
                for r in runs if r.data.tags.get("dlaas.entry") in ("train", "infer")}
    assert measured == {"tensorflow"}, measured
