"""Whether a run's measured phases were disturbed: other processes, steal, memory pressure.

The monitor's system counters include the measured tree's own CPU time and the harness's
(the entry process: sampler and MLflow logging); what is left after subtracting both was
used by someone else. The harness's share is reported apart (``harness_cpu_cores``).
Thresholds are entry-point params, logged with the run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.runs.schema import (
    HARNESS_CORES,
    HARNESS_CPU_SECONDS,
    MEMORY_PRESSURE,
    MONITORED,
    OTHER_CORES,
    PHASE_DURATION,
    PROC_CPU_SECONDS,
    RUN_PHASE,
    STEAL_FRACTION,
    SYS_CPU_BUSY,
    SYS_CPU_STEAL,
    SYS_MEMORY_PRESSURE,
    VALIDITY_REASON_TAG,
    VALIDITY_TAG,
)

VALID, DISTURBED = "valid", "disturbed"
#: Phases shorter than this (pooled over their windows) are too short to judge on their own:
#: CPU time ticks in 10 ms jiffies, so a few ticks in a 2 ms window read as tens of cores.
MIN_JUDGED_S = 1.0


@dataclass(frozen=True)
class ValidityThresholds:
    """Above any of these, during any measured phase, a run is ``disturbed``.

    ``validity_max_other_cores``: mean cores used by other processes;
    ``validity_max_steal_fraction``: share of the machine's CPU time stolen by the host;
    ``validity_max_memory_pressure_percent``: PSI memory ``some avg10`` peak.
    """

    validity_max_other_cores: float = 0.25
    validity_max_steal_fraction: float = 0.05
    validity_max_memory_pressure_percent: float = 10.0

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value}")

    @classmethod
    def pop_from(cls, params: dict[str, Any]) -> ValidityThresholds:
        """Take the threshold params out of ``params`` (strings allowed)."""
        given = {}
        for name in asdict(cls()):
            if name in params:
                try:
                    given[name] = float(params.pop(name))
                except (TypeError, ValueError):
                    raise ConfigError(f"{name} must be a number") from None
        return cls(**given)


@dataclass(frozen=True)
class ValidityVerdict:
    """``valid`` or ``disturbed``, what decided it, and the figures per judged phase."""

    status: str
    reason: str
    figures: dict[str, float]

    def tags(self) -> dict[str, str]:
        return {VALIDITY_TAG: self.status, VALIDITY_REASON_TAG: self.reason[:5000]}


def judge(summary: Mapping[str, float], phases: tuple[str, ...], cores: int,
          thresholds: ValidityThresholds) -> ValidityVerdict:
    """The verdict over ``phases`` of a monitor summary (keys ``{phase}/...``).

    Phases of at least :data:`MIN_JUDGED_S` are judged. When every measured phase is
    shorter, the whole run is judged in their place where it is long enough: a
    measurement that short is only as quiet as the run around it.
    """
    present = [p for p in phases if summary.get(f"{p}/{PHASE_DURATION}", 0.0) > 0]
    if not present:
        return ValidityVerdict(DISTURBED, "no measured phase was recorded", {})
    judged = [p for p in present if summary[f"{p}/{PHASE_DURATION}"] >= MIN_JUDGED_S]
    note = ""
    if not judged:
        measured_s = sum(summary[f"{p}/{PHASE_DURATION}"] for p in present)
        if summary.get(f"{_span(summary, RUN_PHASE)}{PHASE_DURATION}", 0.0) >= MIN_JUDGED_S:
            judged = [RUN_PHASE]
            note = (f"; the measured phases ({measured_s:.2f} s in all) are too short to "
                    "judge alone, so the whole run was judged")
        else:
            judged = present
    figures: dict[str, float] = {}
    problems: list[str] = []
    for phase in judged:
        found = _phase_figures(summary, phase, cores)
        figures.update({f"{phase}/{k}": v for k, v in found.items()})
        problems += _problems(phase, found, cores, thresholds)
    if problems:
        return ValidityVerdict(DISTURBED, "; ".join(problems) + note, figures)
    worst = max((figures[f"{p}/{OTHER_CORES}"], p) for p in judged)
    return ValidityVerdict(VALID, f"quiet: other processes used at most {worst[0]:.2f} of {cores} "
                          f"cores (during {worst[1]}){note}", figures)


def _phase_figures(summary: Mapping[str, float], phase: str, cores: int) -> dict[str, float]:
    """Other processes' cores, ours and the hypervisor's steal over ``phase``; for the whole
    run, over the span the monitor sampled (``run/monitored_*``, where the summary has it)."""
    span = _span(summary, phase)
    duration = summary[f"{span}{PHASE_DURATION}"]
    harness = summary.get(f"{span}{HARNESS_CPU_SECONDS}", 0.0)
    others = summary.get(f"{span}{SYS_CPU_BUSY}", 0.0) - summary.get(
        f"{span}{PROC_CPU_SECONDS}", 0.0) - harness
    found = {OTHER_CORES: max(others, 0.0) / duration,
             HARNESS_CORES: harness / duration,
             STEAL_FRACTION: summary.get(f"{span}{SYS_CPU_STEAL}", 0.0)
             / (duration * max(cores, 1))}
    pressure = summary.get(f"{phase}/peak_{SYS_MEMORY_PRESSURE}")
    if pressure is not None:
        found[MEMORY_PRESSURE] = pressure
    return found


def _span(summary: Mapping[str, float], phase: str) -> str:
    """The key prefix of ``phase``'s figures: ``run/monitored_`` where the summary has it."""
    return (f"{phase}/{MONITORED}" if f"{phase}/{MONITORED}{PHASE_DURATION}" in summary
            else f"{phase}/")


def _problems(phase: str, found: Mapping[str, float], cores: int,
              limits: ValidityThresholds) -> list[str]:
    problems = []
    if found[OTHER_CORES] > limits.validity_max_other_cores:
        problems.append(f"other processes used {found[OTHER_CORES]:.2f} of "
                        f"{cores} cores during {phase} (limit "
                        f"{limits.validity_max_other_cores:g})")
    if found[STEAL_FRACTION] > limits.validity_max_steal_fraction:
        problems.append(f"the hypervisor stole {100 * found[STEAL_FRACTION]:.1f} % of "
                        f"the CPU during {phase}")
    pressure = found.get(MEMORY_PRESSURE, 0.0)
    if pressure > limits.validity_max_memory_pressure_percent:
        problems.append(f"memory pressure reached {pressure:.1f} % during {phase}")
    return problems


def disturbed_warning(tags: Mapping[str, str]) -> str:
    """What a disturbed run's console line says first (``disturbed: other processes used
    1.30 of 2 cores during train (limit 0.25); not comparable``), '' for any other run."""
    if tags.get(VALIDITY_TAG) != DISTURBED:
        return ""
    reason = tags.get(VALIDITY_REASON_TAG, "") or "other work shared the CPU"
    return f"disturbed: {reason}; not comparable"
