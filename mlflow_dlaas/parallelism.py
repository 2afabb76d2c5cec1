"""Threads, BLAS / OpenMP, CPU affinity and parallel libraries: validated settings, applied
before import, read back."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.libraries.settings import (
    LIBRARY_SETTINGS,
    check_library_settings,
    library_environment,
)

#: Boolean spellings of onednn's on / off.
ONEDNN_ALIASES = {"true": "on", "1": "on", "yes": "on", "false": "off", "0": "off", "no": "off"}
#: Settings given as strings (the rest are thread counts).
STRING_SETTINGS = ("cpu_affinity", *LIBRARY_SETTINGS)
#: The BLAS pools ``blas_threads`` sizes: OpenBLAS, MKL, BLIS (numpy's and the frameworks').
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


#: The most threads one setting may ask for (a pool of more fails at thread creation, or
#: waits on memory, long before it could be measured).
MAX_THREADS = 4096


@dataclass(frozen=True)
class ParallelismSettings:
    """What a run asks for; ``None`` keeps the framework's default.

    ``intra_op_threads``: threads inside one operator; ``inter_op_threads``: operators run
    concurrently; ``omp_threads`` / ``blas_threads``: OpenMP and BLAS pools (environment,
    read at library load); ``cpu_affinity``: the logical cores the process may run on.
    The parallel libraries (``openmp_runtime``, ``allocator``, ``onednn`` and the OpenMP
    thread policies) are described in :mod:`mlflow_dlaas.libraries.settings`; 'default' and
    '' keep what the framework does on its own.
    """

    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    omp_threads: int | None = None
    blas_threads: int | None = None
    cpu_affinity: tuple[int, ...] | None = None
    openmp_runtime: str = "default"
    allocator: str = "default"
    onednn: str = "default"
    omp_proc_bind: str = ""
    omp_places: str = ""
    omp_wait_policy: str = ""
    kmp_affinity: str = ""
    kmp_blocktime: str = ""

    def __post_init__(self) -> None:
        for name in ("intra_op_threads", "inter_op_threads", "omp_threads", "blas_threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be >= 1 (or 0 for the framework default), "
                                  f"got {value}")
            if value is not None and value > MAX_THREADS:
                raise ConfigError(f"{name} {value} is more than the {MAX_THREADS:,} threads a "
                                  "setting may ask for; give at most the cores you have "
                                  f"({available_cores()} here)")
        if self.cpu_affinity is not None:
            cores = os.cpu_count() or 1
            bad = [c for c in self.cpu_affinity if not 0 <= c < cores]
            if bad or not self.cpu_affinity:
                raise ConfigError(f"cpu_affinity {self.cpu_affinity} names cores outside "
                                  f"0-{cores - 1}; use e.g. '0-{cores - 1}' or '0,1'")
        check_library_settings(self)

    @classmethod
    def from_params(
        cls,
        *,
        intra_op_threads: int = 0,
        inter_op_threads: int = 0,
        omp_threads: int = 0,
        blas_threads: int = 0,
        cpu_affinity: str = "",
        **libraries: str,
    ) -> ParallelismSettings:
        """From entry-point params, where 0 and '' mean 'framework default'; ``libraries``:
        the :data:`LIBRARY_SETTINGS` by name."""
        unknown = sorted(set(libraries) - set(LIBRARY_SETTINGS))
        if unknown:
            raise ConfigError(f"unknown parallelism setting(s): {', '.join(unknown)}")
        defaults = {"openmp_runtime": "default", "allocator": "default", "onednn": "default"}
        given = {k: str(v).strip().lower() or defaults.get(k, "") for k, v in libraries.items()}
        if "onednn" in given:  # YAML reads on / off as booleans
            given["onednn"] = ONEDNN_ALIASES.get(given["onednn"], given["onednn"])
        return cls(
            **given,
            intra_op_threads=intra_op_threads or None,
            inter_op_threads=inter_op_threads or None,
            omp_threads=omp_threads or None,
            blas_threads=blas_threads or None,
            cpu_affinity=parse_cores(cpu_affinity) if cpu_affinity else None,
        )

    def oversubscription_warnings(self) -> list[str]:
        """One line per setting that asks for more threads than the cores available."""
        cores = len(self.cpu_affinity) if self.cpu_affinity else available_cores()
        found = []
        for name in ("intra_op_threads", "inter_op_threads", "omp_threads", "blas_threads"):
            value = getattr(self, name)
            if value is not None and value > cores:
                found.append(f"{name}={value} exceeds the {cores} cores available: threads "
                             "will time-share cores (oversubscription)")
        return found


def parse_cores(text: str) -> tuple[int, ...]:
    """'0-3,6' -> (0, 1, 2, 3, 6)."""
    cores: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                lo, hi = part.split("-")
                cores.extend(range(int(lo), int(hi) + 1))
            elif part.strip():
                cores.append(int(part))
    except ValueError:
        raise ConfigError(f"cpu_affinity {text!r} is not a core list like '0-3' or '0,2'") from None
    return tuple(sorted(set(cores)))


def available_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def worker_environment(settings: ParallelismSettings, extra_env: dict[str, str]
                       ) -> dict[str, str]:
    """The variables libraries read at load, for the measured worker's environment.

    ``extra_env`` carries the framework's own variables (such as MXNet's worker threads).
    Affinity is not an environment: the worker is pinned before it starts. The library
    settings add ``LD_PRELOAD`` and the OpenMP policies (ConfigError where a library they
    need is not installed).
    """
    env: dict[str, str] = {}
    if settings.omp_threads is not None:
        env["OMP_NUM_THREADS"] = str(settings.omp_threads)
    if settings.blas_threads is not None:
        for var in BLAS_THREAD_VARIABLES:
            env[var] = str(settings.blas_threads)
    return {**env, **library_environment(settings), **extra_env}


def process_settings_in_force() -> dict[str, Any]:
    """Affinity and every BLAS / OpenMP pool loaded in this process, with its thread count."""
    in_force: dict[str, Any] = {"cpu_affinity": ",".join(map(str, sorted(os.sched_getaffinity(0))))
                                if hasattr(os, "sched_getaffinity") else "unknown"}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return in_force
    for pool in threadpool_info():
        api = pool.get("user_api")
        lib = pool.get("internal_api")
        key = f"{api}_{lib}_threads"
        in_force[key] = max(int(pool.get("num_threads", 0)), int(in_force.get(key, 0)))
    return in_force
