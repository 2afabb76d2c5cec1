"""A grid study's points by value: each point (a tuple of settings) measured exactly once.

Optuna's ``GridSampler`` names a point by its index in a grid it shuffles with its seed, so
a resumed study whose sampler is seeded anew, or a retry mapped back by index, measures one
point twice and skips another. This sampler decides by value instead: when a trial starts
(``before_trial``, inside ``ask()``), it looks at every trial's point, takes one that no
trial holds, and records it on the trial (:data:`POINT_ATTR`) before any parameter is drawn,
so that a trial stopped at any moment still says which point it was given. A point is held
by a trial that is complete, pruned, running, queued (a retry) or failed on its own (a
failed workload is not measured again by the grid); a trial given up because its worker
stopped holds nothing: its retry, queued with the point's settings, holds it. Nor does one
that failed while the tracking server did not answer: the study's next run measures it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from mlflow_dlaas.optuna_access.internals import storage_of, trial_id

#: the system attribute that holds a trial's grid point, set before any parameter is drawn
POINT_ATTR = "dlaas_grid_point"
#: set (user attribute) on a trial failed because its worker stopped; its retry holds its point
GIVEN_UP_ATTR = "dlaas_worker_stopped"
#: set (user attribute) on a trial failed while the tracking server did not answer: its point
#: is measured again, as its failure may be the outage's
OUTAGE_ATTR = "dlaas_store_outage"
#: set (user attribute) on a trial pruned unmeasured because this machine cannot measure its
#: point as meant (bf16 without native units): the reason; its point counts as held, not measured
SKIPPED_ATTR = "dlaas_skipped_here"

Point = dict[str, Any]
#: how often a new trial looks again for a worker that took the same point at the same time
RECHECKS = 3


def canonical(value: Any) -> Any:
    """A setting compared by value: numbers as floats (1 and 1.0 are one point)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return float(value)


def point_key(point: Mapping[str, Any], names: Sequence[str]) -> tuple[Any, ...] | None:
    """The point's identity, or None where it lacks one of ``names``."""
    if any(name not in point for name in names):
        return None
    return tuple(canonical(point[name]) for name in names)


def trial_point(trial: FrozenTrial, names: Sequence[str]) -> Point | None:
    """The whole point a trial was given (recorded, queued or drawn), or None."""
    for found in (trial.system_attrs.get(POINT_ATTR), trial.system_attrs.get("fixed_params"),
                  trial.params):
        if found and point_key(found, names) is not None:
            return {name: found[name] for name in names}
    return None


def holds_its_point(trial: FrozenTrial) -> bool:
    """Whether the trial's point counts as taken (measured, being measured or queued)."""
    if trial.state == TrialState.FAIL:
        return not (trial.user_attrs.get(GIVEN_UP_ATTR) or trial.user_attrs.get(OUTAGE_ATTR))
    return True


class GridByValue:
    """The grid and which of its points the trials hold."""

    def __init__(self, space: Mapping[str, Sequence[Any]]) -> None:
        self.names = list(space)
        self.points = [dict(zip(self.names, values, strict=True))
                       for values in itertools.product(*space.values())]

    def taken(self, trials: Sequence[FrozenTrial]) -> set[tuple[Any, ...]]:
        keys = set()
        for trial in trials:
            point = trial_point(trial, self.names) if holds_its_point(trial) else None
            if point is not None:
                keys.add(point_key(point, self.names))
        return keys

    def missing(self, trials: Sequence[FrozenTrial]) -> list[Point]:
        """The points no trial holds, in the grid's order."""
        taken = self.taken(trials)
        return [p for p in self.points if point_key(p, self.names) not in taken]

    def measured(self, trials: Sequence[FrozenTrial]) -> int:
        """Distinct points with a complete or pruned trial (not one skipped unmeasured)."""
        done = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                and not t.user_attrs.get(SKIPPED_ATTR)]
        return len(self.taken(done))


class GridByValueSampler(optuna.samplers.BaseSampler):
    """Gives each new trial the first point, in the spec's order, that no trial holds (a
    queued trial keeps the settings it was queued with). Two workers that start trials at
    once may pick the same point: each then looks again, and the trial with the higher
    number moves on to the next missing point."""

    def __init__(self, space: Mapping[str, Sequence[Any]]) -> None:
        self.grid = GridByValue(space)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return {}

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        queued = trial.system_attrs.get("fixed_params") or {}
        if point_key(queued, self.grid.names) is not None:
            self._record(study, trial, {name: queued[name] for name in self.grid.names})
            return
        point = None
        for _ in range(RECHECKS):
            others = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
            if point is not None and not self._taken_before(point, others, trial.number):
                return
            point = self._first_missing(others, queued)
            self._record(study, trial, point)

    def _first_missing(self, others: Sequence[FrozenTrial], queued: Mapping[str, Any]
                       ) -> Point:
        """The first point no other trial holds that fits what the trial was queued with
        (a retry of a trial that held part of a point); any point where all are held."""
        fits = [p for p in self.grid.missing(others)
                if all(canonical(p[k]) == canonical(v) for k, v in queued.items() if k in p)]
        return (fits or self.grid.points)[0]

    def _taken_before(self, point: Point, others: Sequence[FrozenTrial], number: int) -> bool:
        """Whether a trial numbered below ``number`` holds ``point`` too."""
        earlier = [t for t in others if t.number < number]
        return point_key(point, self.grid.names) in self.grid.taken(earlier)

    @staticmethod
    def _record(study: optuna.Study, trial: FrozenTrial, point: Point) -> None:
        storage_of(study).set_trial_system_attr(trial_id(trial), POINT_ATTR, point)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        point = trial.system_attrs.get(POINT_ATTR) or {}
        if param_name not in point:
            raise ValueError(f"{param_name!r} is not a dimension of the grid "
                             f"({', '.join(self.grid.names)})")
        return point[param_name]
