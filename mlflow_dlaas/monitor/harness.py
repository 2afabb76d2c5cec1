"""The monitoring process's own CPU time, when it watches another process tree."""

from __future__ import annotations

import os

from mlflow_dlaas.monitor.base import Sampler
from mlflow_dlaas.runs.schema import HARNESS_CPU_SECONDS


class HarnessSampler(Sampler):
    """CPU seconds of this process (sampler, MLflow logging): ours, but not the measured
    tree's; the validity verdict reports it apart from other processes' CPU."""

    name = "harness"

    def open(self) -> None:
        self._cpu0 = _cpu_seconds()

    def collect(self) -> dict[str, float]:
        return {HARNESS_CPU_SECONDS: _cpu_seconds() - self._cpu0}


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system
