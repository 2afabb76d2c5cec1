"""The output check, against a deliberately perturbed ONNX model, with real runtimes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from mlflow_dlaas.backends import InferenceOptions, get_runtime
from mlflow_dlaas.backends.served_model import ModelSource
from mlflow_dlaas.errors import ConfigError, MissingDependencyError, WorkloadError
from mlflow_dlaas.inference import equivalence
from mlflow_dlaas.inference.sources.fresh import export_fresh
from mlflow_dlaas.inference.sources.load import prepared_source

needs = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("onnx") is None
    or importlib.util.find_spec("onnxruntime") is None,
    reason="needs torch, onnx and onnxruntime (extras: torch, onnxruntime)")


def exported_lenet(directory: Path) -> ModelSource:
    """LeNet-5 with random weights, exported to ONNX as a run's fresh model is."""
    export_fresh("lenet5", "", 0, directory)
    return prepared_source(directory)


def _perturb(path: Path, scale: float) -> None:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    first = model.graph.initializer[0]
    weights = numpy_helper.to_array(first)
    first.CopyFrom(numpy_helper.from_array(weights * scale, first.name))
    onnx.save(model, str(path))


@needs
@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_a_faithful_export_passes_and_a_perturbed_one_fails(tmp_path: Path, runtime: str) -> None:
    if importlib.util.find_spec(runtime) is None:
        pytest.skip(f"{runtime} is not installed (extra: {runtime})")
    source = exported_lenet(tmp_path)
    rt = get_runtime(runtime)
    rt.load()
    faithful = equivalence.compare(rt.prepare(source, InferenceOptions())(source.reference_inputs),
                                   source.reference_outputs, precision="fp32", rtol=1e-3,
                                   atol=1e-4)
    assert faithful.passed and faithful.max_abs_error < 1e-4
    _perturb(source.onnx_path, 1.5)
    outputs = rt.prepare(source, InferenceOptions())(source.reference_inputs)
    result = equivalence.compare(outputs, source.reference_outputs, precision="fp32",
                                 rtol=1e-3, atol=1e-4)
    assert not result.passed
    with pytest.raises(WorkloadError, match=r"does not reproduce pytorch's outputs: max abs"):
        equivalence.require(result, runtime, "pytorch")


@needs
def test_int8_is_judged_by_agreement(tmp_path: Path) -> None:
    source = exported_lenet(tmp_path)
    rt = get_runtime("onnxruntime")
    rt.load()
    outputs = rt.prepare(source, InferenceOptions(precision="int8"))(source.reference_inputs)
    result = equivalence.compare(outputs, source.reference_outputs, precision="int8",
                                 rtol=1e-3, atol=1e-4)
    assert result.max_abs_error > 0  # really quantized
    assert result.passed, result


@needs
def test_settings_a_runtime_cannot_honour_are_refused(tmp_path: Path) -> None:
    source = exported_lenet(tmp_path)
    ort = get_runtime("onnxruntime")
    ort.load()
    with pytest.raises(ConfigError, match="fp16 needs device=cuda"):
        ort.refuse_unserved(InferenceOptions(precision="fp16"))  # asked before prepare()
    with pytest.raises(ConfigError, match="graph_optimization_level must be one of"):
        ort.prepare(source, InferenceOptions(graph_optimization_level="max"))
    with pytest.raises(ConfigError, match="no maintained int8 path on the CPU"):
        get_runtime("pytorch").refuse_unserved(InferenceOptions(precision="int8"))


def test_a_missing_runtime_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "openvino", None)
    with pytest.raises(MissingDependencyError, match=r"mlflow-dlaas\[openvino\]"):
        get_runtime("openvino").load()
    with pytest.raises(ConfigError, match="unknown runtime 'tensorrt'"):
        get_runtime("tensorrt")


def test_shapes_must_match() -> None:
    with pytest.raises(WorkloadError, match="output shape"):
        equivalence.compare(np.zeros((2, 10)), np.zeros((2, 5)), precision="fp32", rtol=0,
                            atol=0)
