"""Which of a study's points this machine can measure as they are meant.

A point that holds a setting this machine would only emulate (bf16 on a CPU without native
bf16 units) is valid, but its figures would describe the emulation: a study skips it, as a
pruned trial that says why (:data:`SKIPPED_ATTR`), and ``--dry-run`` lists it beforehand.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from mlflow_dlaas.errors import ConfigError, NotMeasurableHereError
from mlflow_dlaas.tuning.grid import SKIPPED_ATTR
from mlflow_dlaas.tuning.sampling import grid_space
from mlflow_dlaas.tuning.spec import PARSERS, PROJECT_PARAM, StudySpec

#: (the settings skipped, points skipped, points, reason), one per reason
Skipped = list[tuple[str, int, int, str]]


def skip_reason(spec: StudySpec, framework: str, params: Mapping[str, Any]) -> str:
    """Why this machine cannot measure the point ``params`` of ``framework``, or ''."""
    if spec.project:  # the user's project: its settings are its own to check
        return ""
    parse = PARSERS[spec.entry_point]
    try:
        parse({**{k: str(v) for k, v in params.items()},
               PROJECT_PARAM[spec.entry_point]: framework})
    except NotMeasurableHereError as e:
        return str(e)
    except ConfigError:  # another fault: the trial's own run reports it
        return ""
    return ""


def skipped_settings(spec: StudySpec) -> Skipped:
    """(the settings skipped, points skipped, points, reason) for each reason this machine
    skips points of the study; empty when it measures them all. A grid's points are
    counted exactly (the grid holds at most 10,000); another sampler's choices one
    dimension at a time, the others at the entry point's defaults."""
    if spec.project:
        return []
    if spec.sampler == "grid":
        space = grid_space(spec)
        points = [dict(zip(space, values, strict=True))
                  for values in itertools.product(*space.values())]
    else:
        space = {d.name: list(d.choices) for d in spec.search_space if d.kind == "categorical"}
        if len(spec.frameworks) > 1:
            space["framework"] = list(spec.frameworks)
        points = [{name: value} for name, choices in space.items() for value in choices]
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for point in points:
        settings = {k: v for k, v in point.items() if k != "framework"}
        frameworks = [point["framework"]] if "framework" in point else spec.frameworks
        reason = next((r for r in (skip_reason(spec, fw, {**spec.fixed, **settings})
                                   for fw in frameworks) if r), "")
        if reason:
            by_reason.setdefault(reason, []).append(point)
    return [(_common_settings(skipped, space), len(skipped), len(points), reason)
            for reason, skipped in by_reason.items()]


def skipped_lines(spec: StudySpec, skipped: Skipped) -> list[str]:
    """``skipped here: precision=bf16 (1 of 3 points): this CPU has no native bf16 ...``"""
    unit = "points" if spec.sampler == "grid" else "choices"
    return [f"skipped here: {settings} ({count} of {total} {unit}): {reason}"
            for settings, count, total, reason in skipped]


def refuse_if_nothing_measurable(spec: StudySpec, skipped: Skipped) -> None:
    """ConfigError (exit 2) where this machine can measure none of a grid's points."""
    for settings, count, total, reason in skipped:
        if spec.sampler == "grid" and count == total:
            raise ConfigError(f"study spec: every point holds {settings}, which this machine "
                              f"cannot measure: {reason}")


def skipped_trials(trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
    """The pruned trials this machine skipped, with their reason in :data:`SKIPPED_ATTR`."""
    return [t for t in trials if t.state == TrialState.PRUNED and t.user_attrs.get(SKIPPED_ATTR)]


def _common_settings(points: Sequence[Mapping[str, Any]],
                     grid: Mapping[str, Sequence[Any]]) -> str:
    """The settings the skipped points have and the others lack (``precision=bf16``); where
    every point is skipped, the settings they all share."""
    seen = {name: sorted({str(p[name]) for p in points if name in p}) for name in grid}
    telling = [name for name, values in seen.items()
               if values and len(values) < len(set(map(str, grid[name])))]
    telling = telling or [name for name, values in seen.items() if len(values) == 1]
    return ", ".join(f"{name}={'|'.join(seen[name])}" for name in telling) or "every point"


def skipped_text(trials: Sequence[FrozenTrial]) -> str:
    """``trial 1 [precision=bf16]: precision bf16: this CPU has no native bf16 ...``, one
    clause per reason, the trials that had it."""
    by_reason: dict[str, list[str]] = {}
    for t in trials:
        settings = " ".join(f"{k}={v}" for k, v in t.params.items())
        by_reason.setdefault(str(t.user_attrs[SKIPPED_ATTR]), []).append(
            f"trial {t.number}" + (f" [{settings}]" if settings else ""))
    return "; ".join(f"{', '.join(where)}: {reason}" for reason, where in by_reason.items())
