"""``mlflow-dlaas demo``: which frameworks and runtimes the main job measures, and its report
on a machine busy enough to disturb its runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mlflow_dlaas.cli import cli
from mlflow_dlaas.demo import DEMO_SYSTEMS, chosen_systems
from mlflow_dlaas.errors import ConfigError


def test_all_is_every_framework_and_runtime() -> None:
    assert chosen_systems(["all"]) == chosen_systems(None) == set(DEMO_SYSTEMS)
    assert set(DEMO_SYSTEMS) == {"pytorch", "tensorflow", "mxnet", "onnxruntime", "openvino"}


def test_a_runtime_comes_with_the_framework_whose_model_it_serves() -> None:
    assert chosen_systems(["pytorch", "onnxruntime"]) == {"pytorch", "onnxruntime"}
    with pytest.raises(ConfigError, match="onnxruntime serves the model pytorch trains; "
                                          "add pytorch"):
        chosen_systems(["tensorflow", "onnxruntime"])


def test_an_unknown_name_is_one_line_exit_2_naming_the_choices() -> None:
    done = CliRunner().invoke(cli, ["demo", "--frameworks", "pytorch,caffe"])
    assert done.exit_code == 2, done.output
    assert "unknown caffe; choose among pytorch, tensorflow, mxnet, onnxruntime, openvino" \
        in done.output
    assert "Traceback" not in done.output


def test_an_empty_list_is_refused_not_read_as_all() -> None:
    done = CliRunner().invoke(cli, ["demo", "--frameworks", " , "])
    assert done.exit_code == 2, done.output
    assert "--frameworks is empty: give some of pytorch" in done.output


def test_a_busy_machine_that_left_one_valid_run_gets_a_report_of_them_all(
        tracking: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """CI's three workers disturbed 51 of the demo's 52 runs: the report compared the one
    left, which compares nothing. Where the valid runs compare nothing, the demo compares
    them all, marked disturbed, and says so."""
    import mlflow

    from mlflow_dlaas import demo
    from mlflow_dlaas.store.experiments import ensure_experiment

    experiment_id = ensure_experiment(demo.DEMO_EXPERIMENT)
    client = mlflow.MlflowClient()
    for framework, seconds, validity in (("pytorch", 2.0, "valid"),
                                         *((("tensorflow", 3.0 + i / 10, "disturbed"),
                                            ("pytorch", 2.1 + i / 10, "disturbed"))[j]
                                           for i in range(4) for j in (0, 1))):
        run = client.create_run(experiment_id, tags={
            "dlaas.entry": "train", "dlaas.framework": framework, "dlaas.validity": validity,
            "dlaas.host": "aaaaaaaaaaaa"})
        client.log_param(run.info.run_id, "model", "lenet5")
        client.log_metric(run.info.run_id, "Headline/train_time_seconds", seconds)
        client.set_terminated(run.info.run_id, "FINISHED")
    monkeypatch.chdir(tmp_path)
    written, _ = demo._compare()
    assert "the demo's report compares them, marked disturbed" in capsys.readouterr().err
    assert "decided: " in written.markdown.read_text()


def test_a_disturbed_run_is_measured_once_more_until_the_machine_stays_busy(
        tracking: str) -> None:
    import mlflow

    from mlflow_dlaas import demo
    from mlflow_dlaas.runs.schema import VALIDITY_TAG

    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name(tracking).experiment_id

    def run(validity: str) -> str:
        return client.create_run(experiment, tags={VALIDITY_TAG: validity}).info.run_id

    remeasures = demo._Remeasures(demo.REMEASURE_DISTURBED)
    assert not remeasures.take(run("valid"))
    assert remeasures.take(run("disturbed"))  # a burst: measured once more
    remeasures.again_disturbed(run("valid"))
    assert remeasures.take(run("disturbed"))
    remeasures.again_disturbed(run("disturbed"))  # disturbed again: the machine stays busy
    assert not remeasures.take(run("disturbed"))


def test_later_serving_rounds_leave_out_only_a_runtime_far_behind_on_both_questions(
        tracking: str, capsys: pytest.CaptureFixture[str]) -> None:
    """After the screening rounds of serving: a runtime at least CONTENDER_FACTOR behind
    the leader on p99 at batch 1 and on throughput at batch 32 is left out, judged on its
    disturbed runs where it has no valid one; one behind on one question only stays."""
    import mlflow

    from mlflow_dlaas import demo
    from mlflow_dlaas.runs.schema import VALIDITY_TAG

    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name(tracking).experiment_id

    def runs(p99_ms: float, samples_per_s: float, validity: str = "valid") -> list[str]:
        ids = []
        for jitter in (0.95, 1.05):
            run_id = client.create_run(experiment, tags={VALIDITY_TAG: validity}).info.run_id
            client.log_metric(run_id, "single_stream/batch_1/latency_p99_ms", p99_ms * jitter)
            client.log_metric(run_id, "offline/batch_32/throughput_samples_per_second",
                              samples_per_s * jitter)
            ids.append(run_id)
        return ids

    served = {"infer/openvino": runs(0.75, 10_800), "infer/onnxruntime": runs(1.3, 11_900),
              "infer/tensorflow": runs(3.6, 4_900, validity="disturbed"),
              "infer/pytorch": runs(5.7, 6_000), "infer/mxnet": runs(0.7, 2_200)}
    serving = {role: (role.removeprefix("infer/"), "pytorch", {}) for role in served}
    kept = demo._contenders(serving, served)
    # pytorch: 7.6x behind on p99 but within 2x on throughput (11,900 / 6,000 = 1.98)
    assert set(kept) == {"infer/openvino", "infer/onnxruntime", "infer/pytorch", "infer/mxnet"}
    assert "tensorflow at least 2x behind the leader" in capsys.readouterr().err
    assert demo._contenders(serving, {}) == serving  # nothing measured: nothing left out
