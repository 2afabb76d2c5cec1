"""Whole-machine CPU per core, CPU time of everyone, steal, memory, memory pressure, clock."""

from __future__ import annotations

import glob
import time
from pathlib import Path

import psutil

from mlflow_dlaas.monitor.base import MIN_CPU_WINDOW_S, Sampler
from mlflow_dlaas.runs.schema import (
    SYS_CORE_CPU_PERCENT,
    SYS_CPU_BUSY,
    SYS_CPU_FREQ,
    SYS_CPU_PERCENT,
    SYS_CPU_STEAL,
    SYS_MEMORY_AVAILABLE,
    SYS_MEMORY_PERCENT,
    SYS_MEMORY_PRESSURE,
    SYS_MEMORY_USED,
)

PRESSURE_FILE = Path("/proc/pressure/memory")
FREQ_FILES = "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq"


class SystemSampler(Sampler):
    """Per-core CPU % since the previous reading (left to the next sample where that was
    less than :data:`MIN_CPU_WINDOW_S` ago), machine-wide CPU and steal seconds (the
    monitored tree's own time included: the validity verdict subtracts it), memory in use,
    memory pressure (PSI ``some avg10``) and the mean core clock, where the kernel shows them.
    """

    name = "system"

    def open(self) -> None:
        psutil.cpu_percent(percpu=True)  # primes the delta; its first answer is meaningless
        self._percent_at = time.perf_counter()
        self._busy0, self._steal0 = _busy_and_steal_seconds()
        self._freq_files = sorted(glob.glob(FREQ_FILES))

    def collect(self) -> dict[str, float]:
        values: dict[str, float] = {}
        now = time.perf_counter()
        if now - self._percent_at >= MIN_CPU_WINDOW_S:  # psutil: the delta since its last call
            per_core = psutil.cpu_percent(percpu=True)
            self._percent_at = now
            values.update({SYS_CORE_CPU_PERCENT.format(i=i): float(p)
                           for i, p in enumerate(per_core)})
            values[SYS_CPU_PERCENT] = sum(per_core) / max(len(per_core), 1)
        memory = psutil.virtual_memory()
        busy, steal = _busy_and_steal_seconds()
        values[SYS_CPU_BUSY] = busy - self._busy0
        values[SYS_CPU_STEAL] = steal - self._steal0
        values[SYS_MEMORY_USED] = float(memory.total - memory.available)
        values[SYS_MEMORY_AVAILABLE] = float(memory.available)
        values[SYS_MEMORY_PERCENT] = float(memory.percent)
        pressure = _memory_pressure_percent()
        if pressure is not None:
            values[SYS_MEMORY_PRESSURE] = pressure
        if self._freq_files:
            values[SYS_CPU_FREQ] = _mean_freq_mhz(self._freq_files)
        return values


def _busy_and_steal_seconds() -> tuple[float, float]:
    """CPU seconds spent busy by anyone on the machine (all cores), and stolen by the host."""
    t = psutil.cpu_times()
    busy = t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
    return busy, getattr(t, "steal", 0.0)


def _memory_pressure_percent() -> float | None:
    """Share of the last 10 s in which some task stalled on memory (Linux PSI)."""
    try:
        first = PRESSURE_FILE.read_text().splitlines()[0]  # some avg10=0.00 avg60=...
        return float(first.split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None


def _mean_freq_mhz(files: list[str]) -> float:
    khz = []
    for name in files:
        try:
            khz.append(int(Path(name).read_text()))
        except (OSError, ValueError):
            continue
    return sum(khz) / len(khz) / 1000 if khz else 0.0
