"""Library settings in real inference runs: read back from the measured worker (and from each
pinned instance), a setting not in force fails the run, and runtimes that have no use for
a setting refuse it before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from mlflow_dlaas.backends import get_runtime
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.libraries.readback import ARTIFACT_DIR, ARTIFACT_FILE
from mlflow_dlaas.parallelism import ParallelismSettings, available_cores
from mlflow_dlaas.runs.schema import REASON_TAG
from tests.conftest import artifact_text, runs_of
from tests.libraries.test_frameworks import _need

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"model": "lenet5", "batch_sizes": "1,4", "scenarios": "single_stream,offline",
         "min_query_count": 30, "min_duration_s": 0.2, "warmup_queries": 2,
         "monitor_interval": 0.2}


def _infer(experiment: str, runtime: str, **settings: object) -> mlflow.entities.Run:
    """One small inference run through the entry point, as a project starts it."""
    args = [part for k, v in {**SMALL, **settings}.items() for part in (f"--{k}", str(v))]
    env = {**os.environ, "MLFLOW_EXPERIMENT_NAME": experiment, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "mlflow_dlaas.workloads.infer", "--runtime", runtime,
                    *args], env=env, capture_output=True, text=True, timeout=600)
    (run,) = runs_of(experiment)
    return run


def _artifact(run: mlflow.entities.Run, path: str) -> dict:
    return json.loads(artifact_text(run.info.run_id, path))


@pytest.mark.slow
def test_two_pinned_pytorch_instances_on_intel_openmp_and_jemalloc(tracking: str) -> None:
    """Each instance on its own core with one thread, Intel's OpenMP serving and its policy
    read back in each; the run's figures pool both instances' queries."""
    _need("torch", ("openmp_runtime", "intel"), ("allocator", "jemalloc"))
    if available_cores() < 2:
        pytest.skip("two instances on one core each need 2 cores")
    run = _infer(tracking, "pytorch", instances=2, cores_per_instance=1,
                 openmp_runtime="intel", allocator="jemalloc", onednn="off", kmp_blocktime=0)
    assert run.info.status == "FINISHED", run.data.tags.get(REASON_TAG)
    params, metrics = run.data.params, run.data.metrics
    # the worker's own read-back, as a training run logs it
    assert params["in_force_openmp_runtime"] == "intel (libiomp5.so)"
    assert params["in_force_allocator"] == "jemalloc (libjemalloc.so.2)"
    assert params["in_force_onednn"] == "off"
    assert _artifact(run, f"{ARTIFACT_DIR}/{ARTIFACT_FILE}")["not_in_force"] == []
    # each instance's, in its own process
    found = _artifact(run, "instances/instances.json")
    cores = [tuple(i["affinity_in_force"]) for i in found["instances"]]
    assert len(cores) == 2 and len(set(cores)) == 2 and all(len(c) == 1 for c in cores)
    assert params["in_force_instance_cores"] == " | ".join(str(c[0]) for c in cores)
    for instance in found["instances"]:
        assert instance["threads_in_force"]["intra_op_threads"] == "1"
        assert instance["libraries_in_force"]["in_force_openmp_runtime"] == "intel (libiomp5.so)"
        assert instance["libraries_in_force"]["in_force_kmp_blocktime"] == "0"
    own = [m for m in found["measurements"]
           if (m["scenario"], m["batch_size"]) == ("offline", 4)]
    assert [m["instance"] for m in own] == [0, 1]
    assert metrics["offline/batch_4/query_count"] == sum(m["query_count"] for m in own)
    assert metrics["offline/batch_4/throughput_samples_per_second"] == pytest.approx(
        4 * sum(m["query_count"] for m in own) / max(m["measured_seconds"] for m in own))


@pytest.mark.slow
def test_an_inference_setting_not_in_force_fails_the_run_saying_why(tracking: str) -> None:
    _need("torch")
    run = _infer(tracking, "pytorch", kmp_blocktime=0, scenarios="single_stream")
    assert run.info.status == "FAILED"
    reason = run.data.tags[REASON_TAG]
    assert "kmp_blocktime is read by Intel's OpenMP only" in reason
    assert "set openmp_runtime=intel" in reason
    assert run.data.params["in_force_openmp_runtime"].startswith("gnu (libgomp")  # logged


@pytest.mark.parametrize(("runtime", "settings", "message"), [
    ("onnxruntime", {"onednn": "on"}, "CPU execution provider does not use oneDNN"),
    ("onnxruntime", {"onednn": "off"}, "DnnlExecutionProvider"),
    ("onnxruntime", {"openmp_runtime": "intel"}, "ONNX Runtime uses no OpenMP"),
    ("openvino", {"onednn": "off"}, "built on oneDNN and always uses it"),
    ("openvino", {"omp_proc_bind": "close"}, "OpenVINO uses no OpenMP"),
    ("openvino", {"allocator": "jemalloc"}, "aborts in a process with a preloaded malloc"),
])
def test_runtimes_refuse_library_settings_they_have_no_use_for(
        runtime: str, settings: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        get_runtime(runtime).environment(ParallelismSettings(**settings))
    get_runtime(runtime).environment(ParallelismSettings())  # the defaults: no error
