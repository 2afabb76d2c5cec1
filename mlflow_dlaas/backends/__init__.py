"""The backend registry: one package per framework or runtime (``backends/<name>/``: its
``training`` adapter where it trains, its ``serving`` runtime), built-ins plus third parties
through two entry-point groups (``[project.entry-points."mlflow_dlaas.frameworks"]`` and
``."mlflow_dlaas.runtimes"``, ``name = "package.module:Class"``). Looking a name up imports
nothing of the framework itself."""

from __future__ import annotations

from importlib import import_module, metadata

from mlflow_dlaas.backends.serving import InferenceOptions, InferenceRuntime
from mlflow_dlaas.backends.training import BuildOptions, FrameworkAdapter, StepStats, Trainer
from mlflow_dlaas.errors import ConfigError

FRAMEWORK_GROUP = "mlflow_dlaas.frameworks"
RUNTIME_GROUP = "mlflow_dlaas.runtimes"
#: The frameworks that train, by name: 'module:Class' of their adapter.
FRAMEWORKS: dict[str, str] = {
    "pytorch": "mlflow_dlaas.backends.pytorch.training:PyTorchAdapter",
    "tensorflow": "mlflow_dlaas.backends.tensorflow.training:TensorFlowAdapter",
    "mxnet": "mlflow_dlaas.backends.mxnet.training:MXNetAdapter",
}
#: The runtimes that serve, by name: 'module:Class' of their runtime.
RUNTIMES: dict[str, str] = {
    "pytorch": "mlflow_dlaas.backends.pytorch.serving:PyTorchRuntime",
    "tensorflow": "mlflow_dlaas.backends.tensorflow.serving:TensorFlowRuntime",
    "mxnet": "mlflow_dlaas.backends.mxnet.serving:MXNetRuntime",
    "onnxruntime": "mlflow_dlaas.backends.onnxruntime.serving:OnnxRuntimeRuntime",
    "openvino": "mlflow_dlaas.backends.openvino.serving:OpenVINORuntime",
}


def _installed(builtin: dict[str, str], group: str) -> dict[str, str]:
    """Name -> 'module:Class' for the built-ins and the plug-ins installed in ``group``."""
    found = dict(builtin)
    for entry in metadata.entry_points(group=group):
        found.setdefault(entry.name, entry.value)
    return found


def _load(what: str, name: str, known: dict[str, str]) -> object:
    if name not in known:
        raise ConfigError(f"unknown {what} {name!r}; choose one of: {', '.join(sorted(known))}")
    module, _, attr = known[name].partition(":")
    return getattr(import_module(module), attr)()


def available_frameworks() -> dict[str, str]:
    """Name -> 'module:Class' for the built-in training adapters and installed plug-ins."""
    return _installed(FRAMEWORKS, FRAMEWORK_GROUP)


def available_runtimes() -> dict[str, str]:
    """Name -> 'module:Class' for the built-in runtimes and installed plug-ins."""
    return _installed(RUNTIMES, RUNTIME_GROUP)


def get_framework(name: str) -> FrameworkAdapter:
    """A new training adapter for ``name`` (the framework itself is not imported yet)."""
    return _load("framework", name, available_frameworks())  # type: ignore[return-value]


def get_runtime(name: str) -> InferenceRuntime:
    """A new runtime for ``name`` (the runtime's library is not imported yet)."""
    return _load("runtime", name, available_runtimes())  # type: ignore[return-value]


__all__ = ["FRAMEWORKS", "RUNTIMES", "BuildOptions", "FrameworkAdapter", "InferenceOptions",
           "InferenceRuntime", "StepStats", "Trainer", "available_frameworks",
           "available_runtimes", "get_framework", "get_runtime"]
