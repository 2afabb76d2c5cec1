"""Training through the real `mlflow run projects/<framework> -e train` path."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil

import mlflow
import pytest

from mlflow_dlaas.environment import version_in
from mlflow_dlaas.parallelism import available_cores
from mlflow_dlaas.runs.schema import REASON_TAG
from tests.conftest import runs_of
from tests.workloads.projects import assert_flops_and_peak, assert_trained_lenet5, mlflow_run

pytestmark = pytest.mark.slow
SHORT = {"model": "lenet5", "dataset": "mnist5k", "epochs": 2, "batch_size": 64,
         "learning_rate": 0.01, "momentum": 0.9, "target_accuracy": 0.9,
         "monitor_interval": 0.1}


def _only_run(experiment: str):
    (run,) = runs_of(experiment)
    return run


def test_an_imagenet_model_trains_on_synthetic_data_for_a_number_of_steps(tracking: str
                                                                          ) -> None:
    """MobileNetV2 at 224x224 on synthetic_imagenet, bounded by max_steps: speed, memory and
    FLOPs are measured, accuracy is said not to be."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here (extra: torch)")
    out = mlflow_run("pytorch", tracking, {
        "model": "mobilenet_v2", "dataset": "synthetic_imagenet", "epochs": 0,
        "max_steps": 2, "batch_size": 4, "warmup_steps": 1, "log_model": "false"})
    assert out.returncode == 0, out.stderr[-3000:]
    run = _only_run(tracking)
    m = run.data.metrics
    assert run.info.status == "FINISHED"
    assert m["parameter_count"] == 3_504_872 and m["steps_completed"] == 2
    assert run.data.tags["dlaas.accuracy"] == "not measured (synthetic data)"
    assert not [k for k in m if "accuracy" in k or k.endswith("target_reached")], sorted(m)
    assert "eval/duration_seconds" not in m  # no per-epoch evaluation of random labels
    assert_flops_and_peak(run, "mobilenet_v2", (3, 224, 224), 1000)
    headline = [line for line in (out.stdout + out.stderr).splitlines()
                if "training time" in line]
    assert headline and "accuracy" not in headline[-1], headline


def test_mxnet_trains_in_its_own_virtualenv(tracking: str) -> None:
    if shutil.which("pyenv") is None:
        pytest.skip("MLflow's virtualenv manager needs pyenv for the exact Python 3.11.7")
    out = mlflow_run("mxnet", tracking, {**SHORT, "inter_op_threads": 1, "blas_threads": 1},
                     env_manager="virtualenv", timeout=1500)
    assert out.returncode == 0, out.stderr[-3000:]
    run = assert_trained_lenet5(mlflow.MlflowClient(), _only_run(tracking), "mxnet")
    assert version_in(run.data.tags, "numpy").startswith("1.23")
    assert run.data.tags["dlaas.onnx"] == "onnx/model.onnx"
    assert run.data.params["in_force_inter_op_threads"] == "1"
    blas = {k: v for k, v in run.data.params.items() if k.startswith("in_force_blas_")}
    assert blas and set(blas.values()) == {"1"}, blas  # every BLAS pool, in MXNet's env too


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"learning_rate": 1e6, "epochs": 1}, "training diverged"),
        ({"batch_size": 0}, "batch_size must be > 0"),
        ({"model": "resnet9"}, "unknown model 'resnet9'"),
        ({"dataset": "imagenet"}, "unknown dataset 'imagenet'"),
    ],
    ids=["diverging-lr", "zero-batch", "unknown-model", "unknown-dataset"],
)
def test_bad_runs_end_failed_with_the_reason(tracking: str, params: dict, reason: str) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here (extra: torch)")
    out = mlflow_run("pytorch", tracking, {**SHORT, "log_model": "false", **params},
                     timeout=300)
    assert out.returncode != 0
    assert reason in out.stderr
    run = _only_run(tracking)
    assert run.info.status == "FAILED"
    assert reason in run.data.tags[REASON_TAG]


def test_more_threads_than_cores_warns_and_still_trains(tracking: str) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here (extra: torch)")
    threads = available_cores() + 2
    out = mlflow_run("pytorch", tracking, {**SHORT, "epochs": 1, "log_model": "false",
                                           "intra_op_threads": threads})
    assert out.returncode == 0, out.stderr[-3000:]
    run = _only_run(tracking)
    assert run.info.status == "FINISHED"
    assert "exceeds" in run.data.tags["dlaas.warning"]
    assert run.data.params["in_force_intra_op_threads"] == str(threads)


def test_direct_invocation_refuses_bad_params_before_any_run(tracking: str) -> None:
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_RUN_ID"}
    env["MLFLOW_EXPERIMENT_NAME"] = tracking
    out = subprocess.run([sys.executable, "-m", "mlflow_dlaas.workloads.train", "--framework",
                          "caffe"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2
    assert "unknown framework 'caffe'" in out.stderr
    assert runs_of(tracking) == []


def test_a_batch_that_cannot_fit_in_memory_is_refused_with_the_figure(tracking: str) -> None:
    """ResNet-50 at batch 100,000 would hold about 8 TiB of activations: refused before any
    worker or run, with the batch size that fits here."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_RUN_ID"}
    env["MLFLOW_EXPERIMENT_NAME"] = tracking
    out = subprocess.run([sys.executable, "-m", "mlflow_dlaas.workloads.train", "--framework",
                          "pytorch", "--model", "resnet50", "--dataset", "synthetic_imagenet",
                          "--epochs", "0", "--max_steps", "5", "--batch_size", "100000"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert "model resnet50 at batch_size 100000 on synthetic_imagenet needs at least" in line
    assert re.search(r"activations 8,\d{3},\d{3} MiB", line), line  # 86 MiB a sample
    fits = int(re.search(r"lower batch_size to at most (\d+)", line).group(1))
    assert 1 <= fits < 100_000
    assert "Traceback" not in out.stderr
    assert runs_of(tracking) == []
