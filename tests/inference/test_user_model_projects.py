"""The user's own model through the real ``mlflow run projects/<runtime> -e infer`` path."""

from __future__ import annotations

import uuid
from pathlib import Path

import mlflow
import numpy as np
import pytest

from mlflow_dlaas.backends.model_files import TRUST_PICKLES_ENV
from mlflow_dlaas.runs.schema import REASON_TAG, TRUSTED_PICKLE_TAG
from mlflow_dlaas.workloads.server_scenario import AUTO_RATE_BACKOFFS
from tests.conftest import only_finished_run, runs_of, skip_unless_installed
from tests.inference.test_user_model import write_two_input_onnx
from tests.workloads.projects import mlflow_run

pytestmark = pytest.mark.slow
QUICK = {"batch_sizes": "1,4", "min_query_count": 20, "min_duration_s": 0.2,
         "warmup_queries": 3, "monitor_interval": 0.1}




@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_any_onnx_file_is_benchmarked_in_every_scenario(tracking: str, tmp_path: Path,
                                                        runtime: str) -> None:
    skip_unless_installed("onnx", runtime)
    model = write_two_input_onnx(tmp_path / "two.onnx")
    params = {**QUICK, "model_uri": f"file://{model}", "input_shape": "y:3",
              "scenarios": "single_stream,multi_stream,offline,server",
              "multi_stream_samples": 4, "server_max_batch": 4, "server_max_wait_ms": 1,
              "server_p99_bound_ms": 20}
    out = mlflow_run(runtime, tracking, params, entry="infer", timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    run = only_finished_run(tracking)
    m, client = run.data.metrics, mlflow.MlflowClient()
    assert run.data.params["model_inputs"] == "x:float32[4],y:float32[3]"
    assert run.data.params["reference_framework"] == "onnx"
    assert m["equivalence/max_abs_error"] < 1e-4
    assert "offline/throughput_samples_per_second" in m
    # samples a query: the scenario's property, never a batch size (no row, no axis point)
    assert m["multi_stream/samples_per_query"] == 4
    assert not [k for k in m if k.startswith("multi_stream/batch_")]
    curve = client.get_metric_history(run.info.run_id, "server_load/latency_p99_ms")
    # every probe is a point, step = offered QPS; so is each automatic rate the runtime fell
    # behind before the search began (a busy machine: the target is halved, a few times at most)
    probes = m["server/rate_search_probes"]
    assert 2 <= probes <= len(curve) <= probes + AUTO_RATE_BACKOFFS, (probes, len(curve))
    tags = run.data.tags
    assert tags["dlaas.loadgen_result"].startswith(("VALID", "INVALID ("))
    if "Headline/server_max_qps_within_p99_bound" in m:  # LoadGen judged a probe VALID: within it
        assert m["Headline/server_p99_at_max_qps_ms"] <= 20
        best = max(1, round(m["Headline/server_max_qps_within_p99_bound"]))
        assert best in {point.step for point in curve}
        assert tags["dlaas.server_rate_search"].startswith(("converged", "stopped: "))
    else:
        assert tags["dlaas.server_rate_search"].startswith("no rate met p99 <= 20 ms")
    logs = {a.path for a in client.list_artifacts(run.info.run_id, "loadgen/offline_batch_4")}
    assert logs == {"loadgen/offline_batch_4/mlperf_log_summary.txt",
                    "loadgen/offline_batch_4/mlperf_log_detail.txt"}


def test_a_missing_model_file_fails_the_run_with_the_reason(tracking: str,
                                                            tmp_path: Path) -> None:
    skip_unless_installed("onnx", "onnxruntime")
    out = mlflow_run("onnxruntime", tracking, {**QUICK, "model_uri": str(tmp_path / "no.onnx")},
                     entry="infer", timeout=300)
    assert out.returncode != 0 and "does not exist" in out.stderr
    (run,) = runs_of(tracking)
    assert run.info.status == "FAILED" and "does not exist" in run.data.tags[REASON_TAG]


def test_a_registered_pytorch_model_is_served_natively_and_as_onnx(
        tracking: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """models:/<name>/<version>: its signature gives the input shape, its input example the
    samples; PyTorch's own outputs are the reference for every runtime. MLflow's pickle
    serialization is loaded only on the user's word, and the run says so."""
    skip_unless_installed("torch", "onnx", "onnxruntime")
    import torch

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    name = f"tiny-{uuid.uuid4().hex[:6]}"
    with mlflow.start_run(run_name="register"):
        mlflow.pytorch.log_model(module.eval(), name="model", registered_model_name=name,
                                 input_example=np.random.default_rng(0).random(
                                     (2, 6), dtype=np.float32), pip_requirements=["torch"],
                                 serialization_format="pickle")
    monkeypatch.delenv(TRUST_PICKLES_ENV, raising=False)
    refused = mlflow_run("pytorch", tracking, {**QUICK, "model_uri": f"models:/{name}/1",
                                               "scenarios": "single_stream"}, entry="infer")
    assert refused.returncode != 0
    (failed,) = [r for r in runs_of(tracking) if r.data.tags.get("dlaas.entry") == "infer"]
    assert failed.info.status == "FAILED"
    assert f"{TRUST_PICKLES_ENV}=1" in failed.data.tags[REASON_TAG]
    client = mlflow.MlflowClient()
    client.delete_run(failed.info.run_id)
    monkeypatch.setenv(TRUST_PICKLES_ENV, "1")
    for runtime in ("pytorch", "onnxruntime"):
        out = mlflow_run(runtime, tracking, {**QUICK, "model_uri": f"models:/{name}/1",
                                             "scenarios": "single_stream"}, entry="infer")
        assert out.returncode == 0, out.stderr[-3000:]
    served = [r for r in runs_of(tracking) if r.data.tags.get("dlaas.entry") == "infer"]
    assert {r.info.status for r in served} == {"FINISHED"}
    assert all(r.data.params["reference_framework"] == "pytorch" for r in served)
    assert all(r.data.params["model_inputs"].endswith("float32[6]") for r in served)
    assert all(r.data.metrics["equivalence/max_abs_error"] < 1e-4 for r in served)
    assert all("loaded because DLAAS_TRUST_PICKLED_MODELS=1" in r.data.tags[TRUSTED_PICKLE_TAG]
               for r in served)


def test_a_keras_file_is_served_by_tensorflow_with_xla(tracking: str, tmp_path: Path) -> None:
    skip_unless_installed("tensorflow")
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(2)])
    path = tmp_path / "small.keras"
    model.save(str(path))
    out = mlflow_run("tensorflow", tracking, {**QUICK, "model_uri": str(path),
                                              "scenarios": "single_stream,offline",
                                              "jit_compile": "true"}, entry="infer")
    assert out.returncode == 0, out.stderr[-3000:]
    run = only_finished_run(tracking)
    assert run.data.params["reference_framework"] == "tensorflow"
    assert run.data.metrics["equivalence/max_abs_error"] < 1e-4
