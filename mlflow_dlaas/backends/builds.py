"""Each framework's build (BLAS, oneDNN, OpenMP, CUDA) for a run's fingerprint, read by its
own backend (``backends/<name>/build.py``) from the imported module."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from mlflow_dlaas.backends.mxnet import build as mxnet_build
from mlflow_dlaas.backends.onnxruntime import build as onnxruntime_build
from mlflow_dlaas.backends.openvino import build as openvino_build
from mlflow_dlaas.backends.pytorch import build as pytorch_build
from mlflow_dlaas.backends.tensorflow import build as tensorflow_build

#: The import name of each framework, and its backend's reader of its build.
READERS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "torch": pytorch_build.read,
    "tensorflow": tensorflow_build.read,
    "mxnet": mxnet_build.read,
    "onnxruntime": onnxruntime_build.read,
    "openvino": openvino_build.read,
}


def framework_builds(*, deep: bool = False) -> dict[str, Any]:
    """Build details of each framework: only those this process imported already (a
    measured worker's), unless ``deep`` (``mlflow-dlaas env`` imports every installed one)."""
    builds: dict[str, Any] = {}
    for module, reader in READERS.items():
        if module not in sys.modules and not deep:
            continue
        try:
            imported = importlib.import_module(module)
            builds.update(reader(imported))
        except Exception as e:  # a broken install must not break the fingerprint
            builds[f"{module}_build_error"] = f"{type(e).__name__}: {e}"
    return builds
