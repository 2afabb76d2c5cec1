"""The framework registry: built-ins, plus third parties through an entry-point group."""

from __future__ import annotations

from importlib import import_module, metadata

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.frameworks.base import BuildOptions, FrameworkAdapter, StepStats, Trainer

ENTRY_POINT_GROUP = "mlflow_dlaas.frameworks"
BUILTIN: dict[str, str] = {
    "pytorch": "mlflow_dlaas.frameworks.pytorch:PyTorchAdapter",
    "tensorflow": "mlflow_dlaas.frameworks.tensorflow:TensorFlowAdapter",
    "mxnet": "mlflow_dlaas.frameworks.mxnet:MXNetAdapter",
}


def available_frameworks() -> dict[str, str]:
    """Name -> 'module:Class' for built-ins and installed plug-ins."""
    found = dict(BUILTIN)
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry.name, entry.value)
    return found


def get_framework(name: str) -> FrameworkAdapter:
    """A new adapter for ``name`` (the framework itself is not imported yet)."""
    known = available_frameworks()
    if name not in known:
        raise ConfigError(f"unknown framework {name!r}; choose one of: {', '.join(sorted(known))}")
    module, _, attr = known[name].partition(":")
    return getattr(import_module(module), attr)()


__all__ = ["BuildOptions", "FrameworkAdapter", "StepStats", "Trainer", "available_frameworks",
           "get_framework"]
