"""Helpers to launch the real `mlflow run projects/<framework>` path from tests."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import mlflow

from mlflow_dlaas.models import get_model
from mlflow_dlaas.runs.schema import REASON_TAG
from tests.conftest import run_building_environment
from tests.legibility import TRAINING_METRIC_BUDGET, assert_legible_in_the_ui

ROOT = Path(__file__).resolve().parents[2]


def mlflow_run(project: str, experiment: str, params: dict[str, object], *,
               entry: str = "train", env_manager: str = "local", timeout: int = 900,
               temp_dir: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``mlflow run projects/<project> -e <entry>`` and return the finished process;
    with ``temp_dir``, the run's TMPDIR (MLflow Projects' own folder for 'path' params goes
    beside it, through --storage-dir)."""
    mlflow_cli = shutil.which("mlflow")
    assert mlflow_cli, "the mlflow CLI must be on PATH (make test puts .venv/bin first)"
    cmd = [mlflow_cli, "run", str(ROOT / "projects" / project), "-e", entry,
           "--experiment-name", experiment, "--env-manager", env_manager]
    for key, value in params.items():
        cmd += ["-P", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID")}
    if temp_dir is not None:
        temp_dir.mkdir(parents=True, exist_ok=True)
        cmd += ["--storage-dir", str(temp_dir.parent / "storage")]
        env["TMPDIR"] = str(temp_dir)
    return run_building_environment(cmd, env_manager, timeout, env=env)


def assert_trained_lenet5(client: mlflow.MlflowClient, run: mlflow.entities.Run,
                          framework: str, epochs: int = 2) -> mlflow.entities.Run:
    """A finished LeNet-5 run on mnist5k past 90 % test accuracy, with every headline
    figure, its per-epoch history, its dataset input, FLOPs and the peak, legible in the UI."""
    assert run.info.status == "FINISHED", run.data.tags.get(REASON_TAG)
    m = run.data.metrics
    assert m["Headline/test_accuracy"] >= 0.90
    assert m["parameter_count"] == 431_080
    for key in ("Headline/train_time_seconds", "test_time_seconds",
                "Headline/time_to_accuracy_seconds", "Headline/train_samples_per_second",
                "Headline/peak_memory_megabytes", "Headline/cpu_seconds",
                "train/proc_cpu_seconds", "run/peak_proc_rss_megabytes", "load/duration_seconds",
                "warmup/duration_seconds", "eval/duration_seconds"):
        assert m[key] > 0, key
    history = client.get_metric_history(run.info.run_id, "test_accuracy")
    assert [h.step for h in history] == list(range(1, epochs + 1))
    assert run.data.params["in_force_intra_op_threads"]
    assert run.data.tags["dlaas.framework"] == framework
    assert run.data.tags["dlaas.env.cpu_model"]
    assert_legible_in_the_ui(run, max_metrics=TRAINING_METRIC_BUDGET, client=client)
    assert run.info.run_name.startswith(f"{framework}-lenet5-bs")
    (dataset,) = run.inputs.dataset_inputs
    assert dataset.dataset.name == "mnist5k" and len(dataset.dataset.digest) == 12
    assert "test accuracy" in run.data.tags["mlflow.note.content"]
    assert_flops_and_peak(run, "lenet5", (1, 28, 28), 10)
    return run


def assert_flops_and_peak(run: mlflow.entities.Run, model: str, shape: tuple[int, int, int],
                          classes: int) -> None:
    """The spec's FLOPs, the rate achieved, and the peak it is held against: the fp32 ceiling
    measured on the cores in use (the tag says so), the nominal peak beside it."""
    m, spec = run.data.metrics, get_model(model)
    assert m["model_forward_flops_per_sample"] == spec.forward_flops(shape, classes)
    assert m["model_training_flops_per_sample"] == spec.training_flops(shape, classes)
    assert m["train_gflops_per_second"] > 0 and m["test_gflops_per_second"] > 0
    assert m["cpu_peak_gflops_per_second"] > 0 and m["cpu_nominal_fp32_peak_gflops_per_second"] > 0
    assert int(run.data.params["in_force_cores"]) >= 1
    assert 0 < m["fraction_of_peak"] <= 1.05
    precision = run.data.params.get("precision", "fp32")
    assert re.fullmatch(rf"measured {precision} ceiling of \d+ core\(s\): [\d.]+ GFLOP/s \(.+\)",
                        run.data.tags["dlaas.peak"]), run.data.tags["dlaas.peak"]
