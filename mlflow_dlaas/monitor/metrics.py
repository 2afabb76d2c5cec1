"""The one registry of monitor metric names: unit and kind of every sampled key.

A *gauge* is a reading at an instant (summarized as peak, mean and p95); a *counter* is
cumulative since the monitor started (summarized as its increase over a phase).
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
    """One sampled metric: key pattern (``{i}`` for a device index), unit, kind, meaning."""

    pattern: str
    unit: str
    kind: Kind
    description: str

    def matches(self, key: str) -> bool:
        return re.fullmatch(re.escape(self.pattern).replace(r"\{i\}", r"\d+"), key) is not None


G, C = Kind.GAUGE, Kind.COUNTER
METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("proc_cpu_percent", "%", G, "process-tree CPU use; 100 = one core busy"),
    MetricSpec("proc_cpu_seconds", "s", C, "process-tree user+system CPU time"),
    MetricSpec("proc_rss_bytes", "B", G, "process-tree resident memory (sum over processes)"),
    MetricSpec("proc_hwm_rss_bytes", "B", G,
               "largest kernel RSS high-water mark in the tree since the last phase began"),
    MetricSpec("proc_threads", "1", G, "threads in the process tree"),
    MetricSpec("proc_processes", "1", G, "processes in the tree"),
    MetricSpec("proc_ctx_switches", "1", C, "voluntary + involuntary context switches"),
    MetricSpec("proc_io_read_bytes", "B", C, "bytes read by the tree (all I/O, not only disk)"),
    MetricSpec("proc_io_write_bytes", "B", C, "bytes written by the tree"),
    MetricSpec("harness_cpu_seconds", "s", C,
               "CPU time of the monitoring process itself (when it watches another tree)"),
    MetricSpec("sys_cpu_percent", "%", G, "whole-machine CPU use, mean over cores"),
    MetricSpec("sys_cpu{i}_percent", "%", G, "CPU use of logical core i"),
    MetricSpec("sys_cpu_busy_seconds", "s", C, "CPU time used by every process on the machine"),
    MetricSpec("sys_cpu_steal_seconds", "s", C, "CPU time the hypervisor gave to other guests"),
    MetricSpec("sys_cpu_freq_mhz", "MHz", G, "mean clock of the logical cores"),
    MetricSpec("sys_memory_used_bytes", "B", G, "whole-machine memory in use"),
    MetricSpec("sys_memory_pressure_percent", "%", G,
               "share of the last 10 s some task stalled on memory (PSI some avg10)"),
    MetricSpec("sys_memory_available_bytes", "B", G, "whole-machine memory available"),
    MetricSpec("gpu{i}_utilization_percent", "%", G, "GPU i busy time"),
    MetricSpec("gpu{i}_memory_used_bytes", "B", G, "GPU i memory in use, whole device"),
    MetricSpec("gpu{i}_proc_memory_used_bytes", "B", G, "GPU i memory used by the tree"),
    MetricSpec("gpu{i}_power_watts", "W", G, "GPU i board power draw"),
    MetricSpec("gpu{i}_energy_joules", "J", C, "GPU i energy from NVML's cumulative counter"),
    MetricSpec("gpu{i}_temperature_celsius", "degC", G, "GPU i temperature"),
    MetricSpec("gpu{i}_sm_clock_mhz", "MHz", G, "GPU i streaming-multiprocessor clock"),
    MetricSpec("cpu_package{i}_energy_joules", "J", C, "CPU package i energy from RAPL"),
)


def spec_of(key: str) -> MetricSpec:
    """The registered spec of ``key``; raises KeyError for an unregistered key."""
    for spec in METRICS:
        if spec.matches(key):
            return spec
    raise KeyError(f"monitor metric {key!r} is not registered in mlflow_dlaas.monitor.metrics")


def is_counter(key: str) -> bool:
    return spec_of(key).kind is Kind.COUNTER
