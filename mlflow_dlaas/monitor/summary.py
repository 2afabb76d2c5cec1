"""Per-phase summaries of a timeline: peak, mean, p95 of gauges; increase of counters."""

from __future__ import annotations

import bisect
import re
from collections import defaultdict

import numpy as np

from mlflow_dlaas.monitor.metrics import is_counter
from mlflow_dlaas.monitor.timeline import PhaseWindow, Sample, Timeline
from mlflow_dlaas.runs.schema import (
    MONITORED,
    PHASE_DURATION,
    PROC_HWM_RSS,
    PROC_RSS,
    RUN_PHASE,
)

RSS, HWM = PROC_RSS, PROC_HWM_RSS
_POWER = re.compile(r"(gpu\d+)_power_watts")


def summarize(timeline: Timeline) -> dict[str, float]:
    """Summary metrics for the whole run (phase ``run``) and each named phase.

    Keys: ``{phase}/duration_seconds``, ``{phase}/peak_{key}``, ``{phase}/mean_{key}``,
    ``{phase}/p95_{key}`` for gauges and ``{phase}/{key}`` (increase) for counters. The peak
    RSS of a phase also counts the kernel's high-water mark when it rose inside the phase, so
    a peak between two samples is not missed. A GPU
    without an energy counter gets ``{phase}/gpuN_energy_joules`` integrated from its power.
    Repeated windows of one name (epochs) are pooled.
    """
    samples = timeline.samples
    if not samples:
        return {}
    windows: dict[str, list[PhaseWindow]] = defaultdict(list)
    first = min([samples[0].t_s, *(w.start_s for w in timeline.phases)])  # phases may begin
    windows[RUN_PHASE].append(PhaseWindow(RUN_PHASE, first, samples[-1].t_s))  # before it
    for window in timeline.phases:
        windows[window.name].append(window)
    times = [s.t_s for s in samples]
    keys = timeline.keys()
    summary: dict[str, float] = {}
    for name, spans in windows.items():
        summary[f"{name}/{PHASE_DURATION}"] = sum(w.duration_s for w in spans)
        inside = [s for w in spans for s in _within(samples, times, w)]
        for key in keys:
            if is_counter(key):
                summary[f"{name}/{key}"] = sum(_increase(samples, times, w, key) for w in spans)
                continue
            values = np.array([s.values[key] for s in inside if key in s.values], dtype=float)
            if values.size:
                summary[f"{name}/peak_{key}"] = float(values.max())
                summary[f"{name}/mean_{key}"] = float(values.mean())
                summary[f"{name}/p95_{key}"] = float(np.percentile(values, 95))
        if f"{name}/peak_{RSS}" in summary:
            summary[f"{name}/peak_{RSS}"] = max(
                summary[f"{name}/peak_{RSS}"],
                *(_high_water_reached(samples, times, w) for w in spans))
        for key in keys:
            found = _POWER.fullmatch(key)
            if found and f"{found.group(1)}_energy_joules" not in keys:
                summary[f"{name}/{found.group(1)}_energy_joules"] = sum(
                    _integral(_within(samples, times, w), key) for w in spans
                )
    summary.update(_monitored_span(samples, keys))
    peaks = [v for k, v in summary.items() if k.endswith(f"/peak_{RSS}")]
    if peaks:  # a phase's peak between samples is the run's too
        summary[f"{RUN_PHASE}/peak_{RSS}"] = max(peaks)
    return summary


def _monitored_span(samples: tuple[Sample, ...], keys: list[str]) -> dict[str, float]:
    """``run/monitored_*``: the counters' increases from the first sample to the last (a
    process's CPU before the monitor's first sample is in ``run/`` but no machine-wide
    counter saw that time)."""
    first, last = samples[0], samples[-1]
    span = {f"{RUN_PHASE}/{MONITORED}{PHASE_DURATION}": last.t_s - first.t_s}
    for key in keys:
        if is_counter(key) and key in first.values and key in last.values:
            span[f"{RUN_PHASE}/{MONITORED}{key}"] = last.values[key] - first.values[key]
    return span


def _within(samples: tuple[Sample, ...], times: list[float], w: PhaseWindow) -> list[Sample]:
    lo = bisect.bisect_left(times, w.start_s)
    hi = bisect.bisect_right(times, w.end_s)
    return list(samples[lo:hi])


def _value_at(samples: tuple[Sample, ...], times: list[float], t: float, key: str) -> float:
    """The last reading of ``key`` at or before ``t`` (0 before the first one)."""
    i = bisect.bisect_right(times, t) - 1
    while i >= 0:
        if key in samples[i].values:
            return samples[i].values[key]
        i -= 1
    return 0.0


def _high_water_reached(samples: tuple[Sample, ...], times: list[float], w: PhaseWindow
                        ) -> float:
    """The kernel's RSS high-water mark if it rose inside ``w`` (a peak between samples;
    the monitor restarts the mark where a phase begins)."""
    start, end = (_value_at(samples, times, t, HWM) for t in (w.start_s, w.end_s))
    return end if end > start else 0.0


def _increase(samples: tuple[Sample, ...], times: list[float], w: PhaseWindow, key: str) -> float:
    return _value_at(samples, times, w.end_s, key) - _value_at(samples, times, w.start_s, key)


def _integral(samples: list[Sample], key: str) -> float:
    points = [(s.t_s, s.values[key]) for s in samples if key in s.values]
    if len(points) < 2:
        return 0.0
    t, v = np.array(points).T
    return float(np.sum((v[1:] + v[:-1]) / 2 * np.diff(t)))
