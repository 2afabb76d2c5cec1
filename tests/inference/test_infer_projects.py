"""Inference through the real `mlflow run projects/<runtime> -e infer` path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import mlflow
import pytest

from mlflow_dlaas.runs.schema import REASON_TAG
from tests.conftest import artifact_text, only_finished_run, runs_of, skip_unless_installed
from tests.legibility import INFERENCE_METRIC_BUDGET, assert_legible_in_the_ui
from tests.workloads.projects import ROOT, mlflow_run

pytestmark = pytest.mark.slow
SMALL = {"model": "lenet5", "batch_sizes": "1,4", "min_query_count": 20,
         "min_duration_s": 0.2, "warmup_queries": 3, "ensemble_size": 2,
         "scenarios": "single_stream,offline,server,ensemble", "monitor_interval": 0.1}
NEEDS = {"pytorch": ["torch"], "tensorflow": ["tensorflow"],
         "onnxruntime": ["torch", "onnx", "onnxruntime"], "openvino": ["torch", "onnx", "openvino"]}
SAME_KEYS = ["load_time_seconds", "equivalence/max_abs_error",
             "single_stream/batch_4/latency_p50_ms",
             "single_stream/latency_p99_ms", "single_stream/batch_4/query_count",
             "offline/throughput_samples_per_second", "server/latency_p99_ms",
             "server/achieved_qps", "ensemble/throughput_samples_per_second",
             "single_stream/peak_proc_rss_megabytes", "Headline/single_stream_p50_ms",
             "Headline/offline_samples_per_second", "Headline/peak_memory_megabytes",
             "offline/proc_cpu_seconds"]




@pytest.mark.parametrize("runtime", list(NEEDS))
def test_every_scenario_runs_with_the_same_metric_keys(tracking: str, runtime: str) -> None:
    skip_unless_installed(*NEEDS[runtime])
    out = mlflow_run(runtime, tracking, SMALL, entry="infer", timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    run = only_finished_run(tracking)
    for key in SAME_KEYS:
        assert key in run.data.metrics, key
    history = mlflow.MlflowClient().get_metric_history(run.info.run_id,
                                                       "single_stream/latency_p99_ms")
    assert sorted(h.step for h in history) == [1, 4]  # step = batch size
    assert run.data.metrics["single_stream/batch_1/query_count"] >= 20
    assert_legible_in_the_ui(run, max_metrics=INFERENCE_METRIC_BUDGET)
    assert run.info.run_name.startswith(f"{runtime}-lenet5-bs1,4")
    assert "single_stream, batch 4" in run.data.tags["mlflow.note.content"]
    assert run.data.params["min_query_count"] == "20"
    assert run.data.tags["dlaas.runtime"] == runtime
    assert run.data.params["in_force_intra_op_threads"]


def test_mxnet_serves_in_its_own_virtualenv(tracking: str) -> None:
    if shutil.which("pyenv") is None:
        pytest.skip("MLflow's virtualenv manager needs pyenv for the exact Python 3.11.7")
    params = {**SMALL, "scenarios": "single_stream,offline"}
    out = mlflow_run("mxnet", tracking, params, entry="infer", env_manager="virtualenv",
                     timeout=1500)
    assert out.returncode == 0, out.stderr[-3000:]
    run = only_finished_run(tracking)
    assert "offline/throughput_samples_per_second" in run.data.metrics


def test_a_training_run_is_served_by_onnxruntime_and_pytorch(tracking: str) -> None:
    skip_unless_installed(*NEEDS["onnxruntime"])
    out = mlflow_run("pytorch", tracking, {"epochs": 1, "log_model": "true"})
    assert out.returncode == 0, out.stderr[-3000:]
    (trained,) = runs_of(tracking)
    uri = f"runs:/{trained.info.run_id}"
    for runtime in ("onnxruntime", "pytorch"):
        out = mlflow_run(runtime, tracking, {**SMALL, "scenarios": "single_stream",
                                             "model_uri": uri}, entry="infer")
        assert out.returncode == 0, out.stderr[-3000:]
    served = [r for r in runs_of(tracking) if r.data.tags.get("dlaas.entry") == "infer"]
    assert {r.info.status for r in served} == {"FINISHED"}
    assert all(r.data.params["reference_framework"] == "pytorch" for r in served)
    assert all(r.data.metrics["equivalence/max_abs_error"] < 1e-3 for r in served)


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"model_uri": "runs:/" + "0" * 32}, "does not exist"),
        ({"batch_sizes": "0,4"}, "batch_sizes must be positive"),
        ({"precision": "fp16"}, "fp16 needs device=cuda"),
    ],
    ids=["missing-run", "zero-batch", "fp16-on-cpu"],
)
def test_bad_input_fails_the_run_with_the_reason(tracking: str, params: dict, reason: str
                                                 ) -> None:
    skip_unless_installed(*NEEDS["onnxruntime"])
    out = mlflow_run("onnxruntime", tracking, {**SMALL, **params}, entry="infer", timeout=300)
    assert out.returncode != 0 and reason in out.stderr
    (run,) = runs_of(tracking)
    assert run.info.status == "FAILED"
    assert reason in run.data.tags[REASON_TAG]


def test_an_ensemble_of_processes_is_measured_together(tracking: str) -> None:
    skip_unless_installed(*NEEDS["onnxruntime"])
    params = {**SMALL, "scenarios": "ensemble", "ensemble_mode": "processes",
              "ensemble_size": 2, "batch_sizes": "1"}
    out = mlflow_run("onnxruntime", tracking, params, entry="infer", timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    run = only_finished_run(tracking)
    m = run.data.metrics
    assert m["ensemble/size"] == 2
    assert m["ensemble/throughput_samples_per_second"] > 0
    details = json.loads(artifact_text(run.info.run_id, "summary.json"))  # every other figure
    assert {"ensemble/model0_latency_p99_ms", "ensemble/model1_latency_p99_ms"} <= set(
        details["workload"])
    assert details["monitor"]["ensemble/peak_proc_processes"] >= 3  # us and both members


@pytest.mark.parametrize("outcome", ["finished", "failed"])
def test_an_inference_run_leaves_nothing_in_the_temp_dir(tracking: str, tmp_path: Path,
                                                         outcome: str) -> None:
    """The model, its export and ONNX Runtime's telemetry session file (``.ses``) all go; MLflow
    Projects' own empty folder for 'path' params is sent elsewhere with --storage-dir."""
    skip_unless_installed(*NEEDS["onnxruntime"])
    temp = tmp_path / "tmp"
    temp.mkdir()
    params = {**SMALL, "scenarios": "single_stream", "batch_sizes": "1",
              **({"precision": "fp16"} if outcome == "failed" else {})}
    cmd = [shutil.which("mlflow"), "run", str(ROOT / "projects" / "onnxruntime"), "-e", "infer",
           "--experiment-name", tracking, "--env-manager", "local",
           "--storage-dir", str(tmp_path / "storage")]
    for key, value in params.items():
        cmd += ["-P", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID")}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                         env={**env, "TMPDIR": str(temp)})
    assert (out.returncode == 0) == (outcome == "finished"), out.stderr[-3000:]
    assert list(temp.iterdir()) == []
