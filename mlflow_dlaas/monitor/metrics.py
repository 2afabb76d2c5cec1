"""The one registry of monitor metric names: unit and kind of every sampled key.

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
TIMELINE_PREFIX = "system/"
METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("proc_cpu_percent", "%", G, "process-tree CPU use; 100 = one core busy",
               "process_tree_cpu_percentage"),
    MetricSpec("proc_cpu_seconds", "s", C, "process-tree user+system CPU time"),
    MetricSpec("proc_rss_bytes", "B", G, "process-tree resident memory (sum over processes)",
               "process_tree_rss_megabytes", MB),
    MetricSpec("proc_hwm_rss_bytes", "B", G,
               "largest kernel RSS high-water mark in the tree since the last phase began"),
    MetricSpec("proc_threads", "1", G, "threads in the process tree",
               "process_tree_threads"),
    MetricSpec("proc_processes", "1", G, "processes in the tree"),
    MetricSpec("proc_ctx_switches", "1", C, "voluntary + involuntary context switches"),
    MetricSpec("proc_io_read_bytes", "B", C, "bytes read by the tree (all I/O, not only disk)"),
    MetricSpec("proc_io_write_bytes", "B", C, "bytes written by the tree"),
    MetricSpec("harness_cpu_seconds", "s", C,
               "CPU time of the monitoring process itself (when it watches another tree)"),
    MetricSpec("sys_cpu_percent", "%", G, "whole-machine CPU use, mean over cores",
               "cpu_utilization_percentage"),
    MetricSpec("sys_cpu{i}_percent", "%", G, "CPU use of logical core i"),
    MetricSpec("sys_cpu_busy_seconds", "s", C, "CPU time used by every process on the machine"),
    MetricSpec("sys_cpu_steal_seconds", "s", C, "CPU time the hypervisor gave to other guests"),
    MetricSpec("sys_cpu_freq_mhz", "MHz", G, "mean clock of the logical cores",
               "cpu_frequency_megahertz"),
    MetricSpec("sys_memory_used_bytes", "B", G, "whole-machine memory in use"),
    MetricSpec("sys_memory_percent", "%", G, "whole-machine memory in use, % of the total",
               "system_memory_usage_percentage"),
    MetricSpec("sys_memory_pressure_percent", "%", G,
               "share of the last 10 s some task stalled on memory (PSI some avg10)",
               "memory_pressure_percentage"),
    MetricSpec("sys_memory_available_bytes", "B", G, "whole-machine memory available"),
    MetricSpec("gpu{i}_utilization_percent", "%", G, "GPU i busy time",
               "gpu_{i}_utilization_percentage"),
    MetricSpec("gpu{i}_memory_used_bytes", "B", G, "GPU i memory in use, whole device",
               "gpu_{i}_memory_usage_megabytes", MB),
    MetricSpec("gpu{i}_proc_memory_used_bytes", "B", G, "GPU i memory used by the tree",
               "gpu_{i}_process_tree_memory_megabytes", MB),
    MetricSpec("gpu{i}_power_watts", "W", G, "GPU i board power draw",
               "gpu_{i}_power_usage_watts"),
    MetricSpec("gpu{i}_energy_joules", "J", C, "GPU i energy from NVML's cumulative counter",
               "gpu_{i}_energy_joules"),
    MetricSpec("gpu{i}_temperature_celsius", "degC", G, "GPU i temperature"),
    MetricSpec("gpu{i}_sm_clock_mhz", "MHz", G, "GPU i streaming-multiprocessor clock"),
    MetricSpec("cpu_package{i}_energy_joules", "J", C, "CPU package i energy from RAPL",
               "cpu_package_{i}_energy_joules"),
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
