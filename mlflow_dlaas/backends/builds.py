"""Each framework's build (BLAS, oneDNN, OpenMP, CUDA) for a run's fingerprint, read by its
own runtime (``InferenceRuntime.build_details``, from ``backends/<name>/build.py``) from the
imported module."""

from __future__ import annotations

import importlib
import sys
from typing import Any

from mlflow_dlaas.backends import available_runtimes, get_runtime
from mlflow_dlaas.console_log import native_chatter_off


def framework_builds(*, deep: bool = False) -> dict[str, Any]:
    """Build details of each runtime's module: only those this process imported already (a
    measured worker's), unless ``deep`` (``mlflow-dlaas env`` imports every installed one)."""
    builds: dict[str, Any] = {}
    read: set[str] = set()
    for name in available_runtimes():
        runtime = get_runtime(name)
        module = runtime.module
        if module in read or (module not in sys.modules and not deep):
            continue
        read.add(module)
        try:
            with native_chatter_off():  # a deep import's banners are not the fingerprint
                imported = importlib.import_module(module)
            builds.update(runtime.build_details(imported))
        except Exception as e:  # a broken install must not break the fingerprint
            builds[f"{module}_build_error"] = f"{type(e).__name__}: {e}"
    return builds
