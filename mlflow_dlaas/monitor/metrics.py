"""The one registry of the monitor's samples: unit, kind and UI name of every sampled key
(the keys and names themselves are spelled in :mod:`mlflow_dlaas.runs.schema`).

A *gauge* is a reading at an instant (summarized as peak, mean and p95); a *counter* is
cumulative since the monitor started (summarized as its increase over a phase). Series with a
``timeline`` name are logged as ``system/<timeline>`` histories, the prefix the MLflow UI's
System metrics tab charts; where MLflow's built-in system metrics measure the same quantity,
the name is theirs (``cpu_utilization_percentage``), so the charts line up.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from mlflow_dlaas.runs.schema import (
    CPU_PACKAGE_ENERGY,
    GPU_ENERGY,
    GPU_MEMORY_USED,
    GPU_POWER,
    GPU_PROC_MEMORY_USED,
    GPU_SM_CLOCK,
    GPU_TEMPERATURE,
    GPU_UTILIZATION,
    HARNESS_CPU_SECONDS,
    PROC_CPU_PERCENT,
    PROC_CPU_SECONDS,
    PROC_CTX_SWITCHES,
    PROC_HWM_RSS,
    PROC_IO_READ,
    PROC_IO_WRITE,
    PROC_PROCESSES,
    PROC_RSS,
    PROC_THREADS,
    SYS_CORE_CPU_PERCENT,
    SYS_CPU_BUSY,
    SYS_CPU_FREQ,
    SYS_CPU_PERCENT,
    SYS_CPU_STEAL,
    SYS_MEMORY_AVAILABLE,
    SYS_MEMORY_PERCENT,
    SYS_MEMORY_PRESSURE,
    SYS_MEMORY_USED,
    TIMELINE_CPU_PACKAGE_ENERGY,
    TIMELINE_GPU_ENERGY,
    TIMELINE_GPU_MEMORY,
    TIMELINE_GPU_POWER,
    TIMELINE_GPU_PROC_MEMORY,
    TIMELINE_GPU_UTILIZATION,
    TIMELINE_MEMORY_PRESSURE,
    TIMELINE_PREFIX,
    TIMELINE_PROC_CPU,
    TIMELINE_PROC_RSS,
    TIMELINE_PROC_THREADS,
    TIMELINE_SYS_CPU,
    TIMELINE_SYS_CPU_FREQ,
    TIMELINE_SYS_MEMORY,
)


class Kind(enum.Enum):
    GAUGE = "gauge"
    COUNTER = "counter"


@dataclass(frozen=True)
class MetricSpec:
    """One sampled metric: key pattern (``{i}`` for a device index), unit, kind, meaning,
    and its name and scale in the MLflow UI's system metrics (None: timeline.csv only)."""

    pattern: str
    unit: str
    kind: Kind
    description: str
    timeline: str | None = None
    timeline_scale: float = 1.0

    def match(self, key: str) -> re.Match[str] | None:
        return re.fullmatch(re.escape(self.pattern).replace(r"\{i\}", r"(?P<i>\d+)"), key)

    def matches(self, key: str) -> bool:
        return self.match(key) is not None


G, C = Kind.GAUGE, Kind.COUNTER
MB = 1e-6  # MLflow's system metrics count megabytes of 10**6 bytes
METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(PROC_CPU_PERCENT, "%", G, "process-tree CPU use; 100 = one core busy",
               TIMELINE_PROC_CPU),
    MetricSpec(PROC_CPU_SECONDS, "s", C, "process-tree user+system CPU time"),
    MetricSpec(PROC_RSS, "B", G, "process-tree resident memory (sum over processes)",
               TIMELINE_PROC_RSS, MB),
    MetricSpec(PROC_HWM_RSS, "B", G,
               "largest kernel RSS high-water mark in the tree since the last phase began"),
    MetricSpec(PROC_THREADS, "1", G, "threads in the process tree",
               TIMELINE_PROC_THREADS),
    MetricSpec(PROC_PROCESSES, "1", G, "processes in the tree"),
    MetricSpec(PROC_CTX_SWITCHES, "1", C, "voluntary + involuntary context switches"),
    MetricSpec(PROC_IO_READ, "B", C, "bytes read by the tree (all I/O, not only disk)"),
    MetricSpec(PROC_IO_WRITE, "B", C, "bytes written by the tree"),
    MetricSpec(HARNESS_CPU_SECONDS, "s", C,
               "CPU time of the monitoring process itself (when it watches another tree)"),
    MetricSpec(SYS_CPU_PERCENT, "%", G, "whole-machine CPU use, mean over cores",
               TIMELINE_SYS_CPU),
    MetricSpec(SYS_CORE_CPU_PERCENT, "%", G, "CPU use of logical core i"),
    MetricSpec(SYS_CPU_BUSY, "s", C, "CPU time used by every process on the machine"),
    MetricSpec(SYS_CPU_STEAL, "s", C, "CPU time the hypervisor gave to other guests"),
    MetricSpec(SYS_CPU_FREQ, "MHz", G, "mean clock of the logical cores",
               TIMELINE_SYS_CPU_FREQ),
    MetricSpec(SYS_MEMORY_USED, "B", G, "whole-machine memory in use"),
    MetricSpec(SYS_MEMORY_PERCENT, "%", G, "whole-machine memory in use, % of the total",
               TIMELINE_SYS_MEMORY),
    MetricSpec(SYS_MEMORY_PRESSURE, "%", G,
               "share of the last 10 s some task stalled on memory (PSI some avg10)",
               TIMELINE_MEMORY_PRESSURE),
    MetricSpec(SYS_MEMORY_AVAILABLE, "B", G, "whole-machine memory available"),
    MetricSpec(GPU_UTILIZATION, "%", G, "GPU i busy time",
               TIMELINE_GPU_UTILIZATION),
    MetricSpec(GPU_MEMORY_USED, "B", G, "GPU i memory in use, whole device",
               TIMELINE_GPU_MEMORY, MB),
    MetricSpec(GPU_PROC_MEMORY_USED, "B", G, "GPU i memory used by the tree",
               TIMELINE_GPU_PROC_MEMORY, MB),
    MetricSpec(GPU_POWER, "W", G, "GPU i board power draw",
               TIMELINE_GPU_POWER),
    MetricSpec(GPU_ENERGY, "J", C, "GPU i energy from NVML's cumulative counter",
               TIMELINE_GPU_ENERGY),
    MetricSpec(GPU_TEMPERATURE, "degC", G, "GPU i temperature"),
    MetricSpec(GPU_SM_CLOCK, "MHz", G, "GPU i streaming-multiprocessor clock"),
    MetricSpec(CPU_PACKAGE_ENERGY, "J", C, "CPU package i energy from RAPL",
               TIMELINE_CPU_PACKAGE_ENERGY),
)


def spec_of(key: str) -> MetricSpec:
    """The registered spec of ``key``; raises KeyError for an unregistered key."""
    for spec in METRICS:
        if spec.matches(key):
            return spec
    raise KeyError(f"monitor metric {key!r} is not registered in mlflow_dlaas.monitor.metrics")


def timeline_name(key: str) -> tuple[str, float] | None:
    """``key``'s MLflow system-metric key and the factor its values are scaled by, or None
    for a series kept in timeline.csv only (per-core CPU, counters of CPU time)."""
    for spec in METRICS:
        found = spec.match(key)
        if found:
            if spec.timeline is None:
                return None
            name = spec.timeline.replace("{i}", found.groupdict().get("i") or "")
            return TIMELINE_PREFIX + name, spec.timeline_scale
    raise KeyError(f"monitor metric {key!r} is not registered in mlflow_dlaas.monitor.metrics")


def is_counter(key: str) -> bool:
    return spec_of(key).kind is Kind.COUNTER
