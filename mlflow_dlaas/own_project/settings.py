"""The parallel-computing settings mlflow-dlaas applies around a process it did not write.

Only what a process reads from its environment, its CPU affinity and its dynamic loader can
be set from outside: thread-count variables (OpenMP, MKL, OpenBLAS, BLIS, TensorFlow's two
pools), the OpenMP thread policies, and ``LD_PRELOAD`` for the OpenMP runtime and the
allocator. Settings a framework takes only through its own API (PyTorch's inter-op pool,
oneDNN on or off in PyTorch) cannot.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.libraries.settings import LIBRARY_SETTINGS
from mlflow_dlaas.parallelism import ParallelismSettings, worker_environment

#: The names a project spec or ``monitor`` may give that mlflow-dlaas applies itself.
OUTSIDE_SETTINGS = ("intra_op_threads", "inter_op_threads", "omp_threads", "blas_threads",
                    "cpu_affinity", *(s for s in LIBRARY_SETTINGS if s != "onednn"))
_THREAD_SETTINGS = ("intra_op_threads", "inter_op_threads", "omp_threads", "blas_threads")
#: What ``intra_op_threads`` sets from outside: the OpenMP, BLAS and TensorFlow intra-op pools.
INTRA_OP_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                      "BLIS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")
#: What ``inter_op_threads`` sets from outside (PyTorch reads no variable for it).
INTER_OP_VARIABLES = ("TF_NUM_INTEROP_THREADS",)


def split_settings(params: Mapping[str, Any]) -> tuple[ParallelismSettings, dict[str, Any]]:
    """``params`` as (the settings mlflow-dlaas applies, the project's own params);
    ConfigError naming a bad setting."""
    if "onednn" in params:
        raise ConfigError("onednn cannot be switched from outside a process (PyTorch takes it "
                          "through its API); set it in your code, or leave it out")
    given = {k: v for k, v in params.items() if k in OUTSIDE_SETTINGS}
    threads = {k: _count(k, given.pop(k)) for k in _THREAD_SETTINGS if k in given}
    libraries = {k: str(v) for k, v in given.items() if k != "cpu_affinity"}
    settings = ParallelismSettings.from_params(
        **threads, cpu_affinity=str(given.get("cpu_affinity") or ""), **libraries)
    return settings, {k: v for k, v in params.items() if k not in OUTSIDE_SETTINGS}


def _count(name: str, value: Any) -> int:
    try:
        count = int(str(value))
    except ValueError:
        raise ConfigError(f"{name} must be a whole number of threads, got {value!r}") from None
    if count < 0:
        raise ConfigError(f"{name} must be >= 1 (or 0 for the default), got {count}")
    return count


def outside_environment(settings: ParallelismSettings) -> dict[str, str]:
    """The variables that carry ``settings`` into a process started with them (ConfigError
    where a preloaded library is not installed)."""
    env: dict[str, str] = {}
    if settings.intra_op_threads is not None:
        env.update(dict.fromkeys(INTRA_OP_VARIABLES, str(settings.intra_op_threads)))
    if settings.inter_op_threads is not None:
        env.update(dict.fromkeys(INTER_OP_VARIABLES, str(settings.inter_op_threads)))
    return {**env, **worker_environment(settings, {})}


@contextlib.contextmanager
def pinned_children(settings: ParallelismSettings) -> Iterator[None]:
    """This process on ``settings.cpu_affinity`` while it starts a child (which inherits
    the mask), then back: the way to pin a process another library starts."""
    if settings.cpu_affinity is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, settings.cpu_affinity)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
