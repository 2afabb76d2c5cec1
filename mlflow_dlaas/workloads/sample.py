"""A small CPU- and memory-bound workload with phases, for demos and monitor checks."""

from __future__ import annotations

import time

import numpy as np

from mlflow_dlaas.monitor import ResourceMonitor


def matmul_burn(seconds: float, size: int = 512) -> int:
    """Multiply ``size`` x ``size`` matrices for ``seconds``; returns the product count."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size))
    count = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        a = np.tanh(a @ a.T / size)
        count += 1
    return count


def run_sample(monitor: ResourceMonitor, *, seconds: float = 3.0, megabytes: int = 200) -> dict:
    """Allocate ``megabytes`` (phase ``load``), then compute (phase ``compute``)."""
    with monitor.phase("load"):
        block = np.ones(megabytes * 1024 * 1024 // 8)
    with monitor.phase("compute"):
        products = matmul_burn(seconds)
    del block
    return {"products": products}
