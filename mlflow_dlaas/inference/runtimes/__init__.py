"""The inference-runtime registry."""

from __future__ import annotations

from importlib import import_module

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.runtimes.base import InferenceOptions, InferenceRuntime

RUNTIMES: dict[str, str] = {
    "pytorch": "mlflow_dlaas.inference.runtimes.pytorch:PyTorchRuntime",
    "tensorflow": "mlflow_dlaas.inference.runtimes.tensorflow:TensorFlowRuntime",
    "mxnet": "mlflow_dlaas.inference.runtimes.mxnet:MXNetRuntime",
    "onnxruntime": "mlflow_dlaas.inference.runtimes.onnxruntime:OnnxRuntimeRuntime",
    "openvino": "mlflow_dlaas.inference.runtimes.openvino:OpenVINORuntime",
}


def get_runtime(name: str) -> InferenceRuntime:
    if name not in RUNTIMES:
        raise ConfigError(f"unknown runtime {name!r}; choose one of: {', '.join(RUNTIMES)}")
    module, _, attr = RUNTIMES[name].partition(":")
    return getattr(import_module(module), attr)()


__all__ = ["RUNTIMES", "InferenceOptions", "InferenceRuntime", "get_runtime"]
