"""Inference through the real `mlflow run projects/<runtime> -e infer` path."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest

from mlflow_dlaas.runs.schema import REASON_TAG
from tests.conftest import artifact_text, only_finished_run, runs_of, skip_unless_installed
from tests.legibility import INFERENCE_METRIC_BUDGET, assert_legible_in_the_ui
from tests.workloads.projects import mlflow_run

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
    said = out.stderr.splitlines()  # what a user sees: where it is, scenario by scenario
    for scenario in ("single_stream", "offline"):
        for batch in (1, 4):
            assert any(line.startswith(f"{scenario} batch {batch}: p99 ") for line in said), said
    assert any(line.startswith(f"load: {runtime} ") for line in said), said
    assert not [line for line in said if "Warning" in line or "Traceback" in line], said
    assert run.data.params["in_force_intra_op_threads"]


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"model_uri": "runs:/" + "0" * 32}, "does not exist"),
        ({"batch_sizes": "0,4"}, "batch_sizes must be positive"),
        ({"precision": "fp16"}, "fp16 needs device=cuda"),
    ],
    ids=["missing-run", "zero-batch", "fp16-on-cpu"],
)
def test_bad_input_fails_the_run_with_the_reason(tracking: str, params: dict, reason: str,
                                                 tmp_path: Path) -> None:
    """The run ends FAILED with the reason, and leaves nothing in the temp dir."""
    skip_unless_installed(*NEEDS["onnxruntime"])
    temp = tmp_path / "tmp"
    out = mlflow_run("onnxruntime", tracking, {**SMALL, **params}, entry="infer", timeout=300,
                     temp_dir=temp)
    assert out.returncode != 0 and reason in out.stderr
    assert list(temp.iterdir()) == []
    (run,) = runs_of(tracking)
    assert run.info.status == "FAILED"
    assert reason in run.data.tags[REASON_TAG]


def test_an_ensemble_of_processes_is_measured_together(tracking: str, tmp_path: Path) -> None:
    """The members are measured as one tree, and no process leaves anything in the temp dir
    (the model, its export and ONNX Runtime's telemetry session file ``.ses`` all go)."""
    skip_unless_installed(*NEEDS["onnxruntime"])
    params = {**SMALL, "scenarios": "ensemble", "ensemble_mode": "processes",
              "ensemble_size": 2, "batch_sizes": "1"}
    temp = tmp_path / "tmp"
    out = mlflow_run("onnxruntime", tracking, params, entry="infer", timeout=600, temp_dir=temp)
    assert out.returncode == 0, out.stderr[-3000:]
    assert list(temp.iterdir()) == []
    run = only_finished_run(tracking)
    m = run.data.metrics
    assert m["ensemble/size"] == 2
    assert m["ensemble/throughput_samples_per_second"] > 0
    details = json.loads(artifact_text(run.info.run_id, "summary.json"))  # every other figure
    assert {"ensemble/model0_latency_p99_ms", "ensemble/model1_latency_p99_ms"} <= set(
        details["workload"])
    assert details["monitor"]["ensemble/peak_proc_processes"] >= 3  # us and both members
