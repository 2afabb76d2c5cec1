"""The inference-runtime registry: built-ins, plus third parties through an entry-point
group (``[project.entry-points."mlflow_dlaas.runtimes"] name = "package.module:Class"``)."""

from __future__ import annotations

from importlib import import_module, metadata

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.runtimes.base import InferenceOptions, InferenceRuntime

ENTRY_POINT_GROUP = "mlflow_dlaas.runtimes"
RUNTIMES: dict[str, str] = {
    "pytorch": "mlflow_dlaas.inference.runtimes.pytorch:PyTorchRuntime",
    "tensorflow": "mlflow_dlaas.inference.runtimes.tensorflow:TensorFlowRuntime",
    "mxnet": "mlflow_dlaas.inference.runtimes.mxnet:MXNetRuntime",
    "onnxruntime": "mlflow_dlaas.inference.runtimes.onnxruntime:OnnxRuntimeRuntime",
    "openvino": "mlflow_dlaas.inference.runtimes.openvino:OpenVINORuntime",
}


def available_runtimes() -> dict[str, str]:
    """Name -> 'module:Class' for built-ins and installed plug-ins."""
    found = dict(RUNTIMES)
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry.name, entry.value)
    return found


def get_runtime(name: str) -> InferenceRuntime:
    """A new runtime for ``name`` (the runtime's library is not imported yet)."""
    known = available_runtimes()
    if name not in known:
        raise ConfigError(f"unknown runtime {name!r}; choose one of: {', '.join(known)}")
    module, _, attr = known[name].partition(":")
    return getattr(import_module(module), attr)()


__all__ = ["RUNTIMES", "InferenceOptions", "InferenceRuntime", "available_runtimes",
           "get_runtime"]
