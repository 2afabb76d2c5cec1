"""Precision as a measured choice: int8 (static QDQ on ONNX Runtime and OpenVINO, dynamic on
ONNX Runtime) and bf16 where the CPU has it, each with its accuracy cost against fp32."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from mlflow_dlaas.backends import InferenceOptions, get_runtime
from mlflow_dlaas.backends.served_model import ModelSource
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.hardware import ASSUMED_FLAGS_VARIABLE, emulated_bf16_reason
from mlflow_dlaas.inference import equivalence
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.sources.fresh import export_fresh, fresh_source
from mlflow_dlaas.inference.sources.load import prepared_source
from mlflow_dlaas.runs.goals import parse_asks
from mlflow_dlaas.runs.schema import EQUIVALENCE_TOP1_AGREEMENT

ONNX_RUNTIMES = ("onnxruntime", "openvino")


def needs(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed here")


def exported(directory: Path) -> ModelSource:
    export_fresh("lenet5", "", 0, directory)
    return prepared_source(directory)


@pytest.mark.parametrize("runtime", ONNX_RUNTIMES)
def test_static_int8_is_measured_against_fp32_on_both_onnx_runtimes(tmp_path: Path,
                                                                    runtime: str) -> None:
    needs("torch", "onnx", "onnxruntime", runtime)
    source = exported(tmp_path)
    served = get_runtime(runtime)
    served.load()
    predict = served.prepare(source, InferenceOptions(precision="int8",
                                                      quantization="static"))
    assert served.threads_in_force()["quantization"] == "static QDQ"
    result = equivalence.compare(predict(source.reference_inputs), source.reference_outputs,
                                 precision="int8", rtol=1e-3, atol=1e-4)
    assert result.passed, result
    assert 0 < result.max_relative_error < equivalence.REDUCED_MAX_RELATIVE_ERROR["int8"]
    assert 0 < result.mean_relative_error <= result.max_relative_error
    assert result.metrics()[EQUIVALENCE_TOP1_AGREEMENT] >= 0.75


def test_openvino_int8_asks_for_static_quantization() -> None:
    """Asked of the runtime's declaration, before anything is loaded or started."""
    with pytest.raises(ConfigError, match="add -P quantization=static"):
        get_runtime("openvino").refuse_unserved(InferenceOptions(precision="int8"))


def test_bf16_where_the_cpu_emulates_it_is_refused_with_the_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On every CPU: an AVX2-only one's detection assumed where this one has bf16."""
    monkeypatch.setenv(ASSUMED_FLAGS_VARIABLE, "avx,avx2,fma")
    with pytest.raises(ConfigError, match=r"precision bf16: this CPU has no native bf16 "
                                          r"\(avx512_bf16 or amx_bf16\)"):
        InferConfig("openvino", precision="bf16")


@pytest.mark.parametrize("runtime", ("pytorch", "openvino", "tensorflow"))
def test_bf16_is_served_and_its_cost_measured_where_the_cpu_has_it(tmp_path: Path,
                                                                   runtime: str) -> None:
    reason = emulated_bf16_reason()
    if reason:
        pytest.skip(reason)
    needs("torch", "onnx", *get_runtime(runtime).modules)
    served = get_runtime(runtime)
    served.load()
    source = (exported(tmp_path) if runtime == "openvino"
              else fresh_source(served, "lenet5", "", 0))
    predict = served.prepare(source, InferenceOptions(precision="bf16"))
    own = served.reference()  # a fresh Keras model's fp32 outputs, computed in prepare
    result = equivalence.compare(predict(served.layout(source.reference_inputs)),
                                 source.reference_outputs if own is None else own,
                                 precision="bf16", rtol=1e-3, atol=1e-4)
    assert result.passed and result.max_abs_error > 0, result
    in_force = served.threads_in_force()
    if runtime != "pytorch":  # PyTorch's module dtype is the asked one by construction
        assert in_force["inference_precision"] in ("bf16", "mixed_bfloat16"), in_force


def test_onnx_runtime_says_it_has_no_bf16_on_the_cpu() -> None:
    with pytest.raises(ConfigError, match="no bf16 kernels"):
        get_runtime("onnxruntime").refuse_unserved(InferenceOptions(precision="bf16"))


def test_an_accuracy_bound_on_the_agreement_with_fp32_is_a_constraint() -> None:
    ((_, (bound,)),) = parse_asks(("inference_throughput",), ("top1_agreement>=0.99",))
    assert bound.metric == EQUIVALENCE_TOP1_AGREEMENT and bound.value == 0.99
    assert bound.holds(1.0) and not bound.holds(0.98)


@pytest.mark.parametrize("cpu_flags", ["avx,avx2,fma", "avx,avx2,fma,avx512f,avx512_bf16"],
                         ids=["avx2", "avx512_bf16"])
def test_an_unserved_precision_is_refused_before_any_run_starts(tracking: str,
                                                                cpu_flags: str) -> None:
    """The entry asks the runtime's declaration first, before the CPU's (a CPU with bf16
    units would not help): exit 2, one line, no run made, on either kind of CPU."""
    import subprocess
    import sys

    import mlflow

    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name(tracking).experiment_id
    done = subprocess.run([sys.executable, "-m", "mlflow_dlaas.workloads.infer", "--runtime",
                           "onnxruntime", "--precision", "bf16", "--batch_sizes", "1"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MLFLOW_EXPERIMENT_ID": experiment,
                               ASSUMED_FLAGS_VARIABLE: cpu_flags})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "no bf16 kernels" in done.stderr and "Traceback" not in done.stderr
    assert "no native bf16" not in done.stderr
    assert client.search_runs([experiment]) == []
