"""Whole-machine CPU per core and memory."""

from __future__ import annotations

import psutil

from mlflow_dlaas.monitor.base import Sampler


class SystemSampler(Sampler):
    """Per-core CPU % since the previous reading, and memory in use."""

    name = "system"

    def open(self) -> None:
        psutil.cpu_percent(percpu=True)  # primes the delta; its first answer is meaningless

    def collect(self) -> dict[str, float]:
        per_core = psutil.cpu_percent(percpu=True)
        memory = psutil.virtual_memory()
        values = {f"sys_cpu{i}_percent": float(p) for i, p in enumerate(per_core)}
        values["sys_cpu_percent"] = sum(per_core) / max(len(per_core), 1)
        values["sys_memory_used_bytes"] = float(memory.total - memory.available)
        values["sys_memory_available_bytes"] = float(memory.available)
        return values
