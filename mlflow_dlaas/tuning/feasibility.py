"""Constraints where Optuna keeps them, and the best trials among the feasible ones.

A trial's constraint values (how far each constraint is missed; <= 0 is feasible) go to the
trial's system attribute ``constraints`` as a list: what Optuna 5 itself writes for a
sampler's ``constraints_func``, what every sampler reads (``FrozenTrial.constraints``), and
what optuna-dashboard 0.21 reads to grey infeasible trials. The driver writes it before
``tell``, so it is there for every sampler, grid and random included.
"""

from __future__ import annotations

from collections.abc import Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

from mlflow_dlaas.optuna_access.internals import CONSTRAINTS_KEY, storage_of
from mlflow_dlaas.runs.goals import Bound
from mlflow_dlaas.tuning.spec import StudySpec

#: A user attribute the dashboard shows as a column of the trials table.
FEASIBLE_ATTR = "feasible"
#: Where studies made before kept the values too (a user attribute).
LEGACY_ATTR = "dlaas_constraint_violations"


def record_constraints(study: optuna.Study, trial_id: int, values: Sequence[float]) -> None:
    """Store a finished trial's constraint values (call before ``tell``)."""
    storage = storage_of(study)
    storage.set_trial_system_attr(trial_id, CONSTRAINTS_KEY, [float(v) for v in values])
    storage.set_trial_user_attr(trial_id, FEASIBLE_ATTR, all(v <= 0 for v in values))


def violations(trial: FrozenTrial) -> list[float]:
    """The trial's constraint values; empty when it has none. A trial of a study made before
    (resumed now) has them in :data:`LEGACY_ATTR` only when its sampler took no
    ``constraints_func`` (grid, random: samplers that do not read them)."""
    found = trial.system_attrs.get(CONSTRAINTS_KEY) or trial.user_attrs.get(LEGACY_ATTR)
    return [float(v) for v in found or []]


def is_feasible(trial: FrozenTrial) -> bool:
    return all(v <= 0 for v in violations(trial))


def best_trials(study: optuna.Study, spec: StudySpec) -> list[FrozenTrial]:
    """The best feasible trial (one objective) or the feasible Pareto front (several);
    empty when no complete trial is feasible."""
    feasible = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if is_feasible(t)]
    if not feasible:
        return []
    if spec.multi_objective:
        numbers = {t.number for t in feasible}
        return [t for t in study.best_trials if t.number in numbers]
    pick = max if spec.directions[0] == "maximize" else min
    return [pick(feasible, key=lambda t: t.values[0])]


def closest_infeasible(study: optuna.Study) -> FrozenTrial | None:
    """The complete trial that misses its constraints by the least (summed), if any."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    infeasible = [t for t in complete if not is_feasible(t)]
    return min(infeasible, key=lambda t: sum(max(v, 0.0) for v in violations(t)), default=None)


def describe_violations(constraints: Sequence[Bound], trial: FrozenTrial) -> str:
    """``Headline/test_accuracy >= 0.9 missed by 0.05`` for each constraint the trial misses."""
    missed = [f"{c.metric} {c.op} {c.value:g} missed by {v:.4g}"
              for c, v in zip(constraints, violations(trial), strict=False) if v > 0]
    return "; ".join(missed) or "no constraint missed"
