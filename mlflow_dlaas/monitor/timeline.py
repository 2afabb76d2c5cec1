"""Samples and phase windows on one clock, and what a monitor hands back."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any

from mlflow_dlaas.runs.schema import MONITOR_CPU_SECONDS, MONITOR_SAMPLES


@dataclass(frozen=True)
class Sample:
    """One reading of every source at ``t_s`` seconds after the monitor started."""

    t_s: float
    values: dict[str, float]


@dataclass(frozen=True)
class PhaseWindow:
    """``name`` was in force from ``start_s`` to ``end_s`` (monitor clock, seconds)."""

    name: str
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Timeline:
    """Every sample and phase window of one monitored run, and the wall-clock anchor."""

    start_wall_s: float
    samples: tuple[Sample, ...]
    phases: tuple[PhaseWindow, ...]

    def keys(self) -> list[str]:
        seen: dict[str, None] = {}
        for sample in self.samples:
            seen.update(dict.fromkeys(sample.values))
        return list(seen)

    def phase_at(self, t_s: float) -> str:
        """The phase in force at ``t_s`` (the latest one that began), or '' between phases."""
        inside = [w for w in self.phases if w.start_s <= t_s <= w.end_s]
        return max(inside, key=lambda w: w.start_s).name if inside else ""

    def to_csv(self) -> str:
        """The raw timeline: one row per sample, ``t_s``, wall time, phase, every key."""
        keys = self.keys()
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["t_s", "wall_time_s", "phase", *keys])
        for s in self.samples:
            writer.writerow(
                [f"{s.t_s:.6f}", f"{self.start_wall_s + s.t_s:.6f}", self.phase_at(s.t_s)]
                + [_fmt(s.values.get(k)) for k in keys]
            )
        return out.getvalue()


@dataclass(frozen=True)
class MonitorResult:
    """What a finished monitor measured: timeline, per-phase summary, missing sources."""

    timeline: Timeline
    summary: dict[str, float]
    unavailable: dict[str, str] = field(default_factory=dict)
    probe_errors: int = 0
    #: the monitor's own CPU (its thread, and the samples other threads asked for)
    monitor_cpu_seconds: float = 0.0
    wall_seconds: float = 0.0  # from the first sample to the last

    @property
    def cpu_percent_of_one_core(self) -> float:
        """The monitor's own CPU as a percentage of one core over the run's wall time."""
        return 100 * self.monitor_cpu_seconds / self.wall_seconds if self.wall_seconds else 0.0

    def own_cost(self) -> dict[str, float]:
        """What the monitor spent itself, as run metrics: its CPU seconds and samples."""
        return {MONITOR_CPU_SECONDS: self.monitor_cpu_seconds,
                MONITOR_SAMPLES: float(len(self.timeline.samples))}

    def as_json(self) -> dict[str, Any]:
        return {
            "phases": [vars(p) for p in self.timeline.phases],
            "summary": self.summary,
            "unavailable": self.unavailable,
            "probe_errors": self.probe_errors,
            **self.own_cost(),
            "monitor_cpu_percent_of_one_core": self.cpu_percent_of_one_core,
            "wall_seconds": self.wall_seconds,
        }


def _fmt(value: float | None) -> str:
    return "" if value is None else repr(value)
