"""Training precision as a measured choice: LeNet-5 in bf16 mixed precision against fp32 on
PyTorch (autocast) and TensorFlow (Keras mixed_bfloat16), its accuracy cost in the report."""

from __future__ import annotations

import importlib.util

import mlflow
import pytest

from mlflow_dlaas.backends import get_framework
from mlflow_dlaas.config import TrainConfig
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.hardware import emulated_bf16_reason
from mlflow_dlaas.report.collect import collect_runs
from mlflow_dlaas.report.precision import training_precision_table
from mlflow_dlaas.report.report import Workloads
from mlflow_dlaas.workloads import train_worker
from tests.conftest import runs_of
from tests.workloads.projects import assert_trained_lenet5, mlflow_run

SHORT = {"model": "lenet5", "dataset": "mnist5k", "epochs": 2, "batch_size": 64,
         "learning_rate": 0.01, "momentum": 0.9, "target_accuracy": 0.9,
         "intra_op_threads": 2, "log_model": "false"}
EXPECTED_IN_FORCE = {"pytorch": "bf16 autocast", "tensorflow": "mixed_bfloat16"}


@pytest.mark.slow
@pytest.mark.parametrize("framework", ("pytorch", "tensorflow"))
def test_lenet5_trained_in_bf16_reports_its_accuracy_against_fp32(tracking: str,
                                                                  framework: str) -> None:
    reason = emulated_bf16_reason()
    if reason:
        pytest.skip(reason)
    if importlib.util.find_spec({"pytorch": "torch"}.get(framework, framework)) is None:
        pytest.skip(f"{framework} is not installed here")
    for precision in ("fp32", "bf16"):
        out = mlflow_run(framework, tracking, {**SHORT, "precision": precision})
        assert out.returncode == 0, out.stderr[-3000:]
    client = mlflow.MlflowClient()
    runs = {r.data.params["precision"]: r for r in runs_of(tracking)}
    for precision, run in runs.items():
        assert_trained_lenet5(client, run, framework)
        assert run.data.tags["dlaas.peak"].startswith(f"measured {precision} ceiling")
    bf16, fp32 = runs["bf16"], runs["fp32"]
    assert bf16.data.params["in_force_precision"] == EXPECTED_IN_FORCE[framework]
    assert fp32.data.params["in_force_precision"] in ("fp32", "float32")
    assert bf16.info.run_name.endswith("-bf16")
    accuracy = "Headline/test_accuracy"
    assert abs(bf16.data.metrics[accuracy] - fp32.data.metrics[accuracy]) < 0.03
    # the ceiling of bf16 is the bf16 products' (several times fp32's on AMX)
    assert bf16.data.metrics["cpu_peak_gflops_per_second"] > \
        fp32.data.metrics["cpu_peak_gflops_per_second"]

    work = Workloads.of(collect_runs(client, experiment=tracking).finished)
    table = training_precision_table(work.train)
    assert table is not None
    (row,) = [dict(zip(table.headings, cells, strict=True)) for cells in table.cells]
    assert (row["system"], row["value"], row["runs vs fp32 runs"]) == (framework, "bf16",
                                                                        "1 vs 1")
    assert row["accuracy"] == f"{bf16.data.metrics[accuracy]:.3f}"
    assert row["accuracy at fp32"] == f"{fp32.data.metrics[accuracy]:.3f}"
    assert row["accuracy vs fp32"].startswith("too few runs")  # one run a side says so


def test_bf16_on_a_cpu_that_would_emulate_it_is_refused(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setattr("mlflow_dlaas.config.emulated_bf16_reason",
                        lambda: emulated_bf16_reason(["avx2", "fma"]))
    with pytest.raises(ConfigError, match=r"precision bf16: this CPU has no native bf16"):
        TrainConfig("pytorch", precision="bf16")
    TrainConfig("pytorch", precision="bf16", device="cuda")  # a GPU's bf16 is its own


def test_an_unknown_training_precision_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"precision must be one of fp32, bf16, got 'int8'"):
        TrainConfig.from_params({"framework": "pytorch", "precision": "int8"})


def test_a_framework_without_bf16_training_says_which_have_it(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setattr("mlflow_dlaas.config.emulated_bf16_reason", lambda: "")
    config = TrainConfig("mxnet", precision="bf16")
    with pytest.raises(ConfigError, match=r"mxnet trains in fp32 here; bf16 training is "
                                          r"measured on pytorch \(autocast\) and tensorflow"):
        train_worker.prepare_trainer(get_framework("mxnet"), config, None, None)
