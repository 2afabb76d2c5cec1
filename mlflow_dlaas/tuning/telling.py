"""How a trial ends in Optuna: told its values (medians over its replicates' runs), pruned,
or failed with its reason, each in one step a stop does not cut in half."""

from __future__ import annotations

import math
import statistics
from typing import Any

import optuna
from optuna.trial import TrialState

from mlflow_dlaas.console_log import console
from mlflow_dlaas.measured_process.lifeline import StopSignals
from mlflow_dlaas.optuna_access.internals import trial_id
from mlflow_dlaas.runs.ui_links import run_url
from mlflow_dlaas.tuning.dashboard_note import save_trial_note, trial_note
from mlflow_dlaas.tuning.feasibility import record_constraints
from mlflow_dlaas.tuning.recovery import REASON_ATTR
from mlflow_dlaas.tuning.spec import StudySpec
from mlflow_dlaas.tuning.trial_runner import ChildOutcome, metric_value, objective_value

log = console(__name__)


def tell(study: optuna.Study, trial: optuna.Trial, stop: StopSignals,
         values: list[float] | None = None, state: TrialState | None = None) -> None:
    """``study.tell``, which a stop does not cut in half; Optuna's grid sampler calls
    ``study.stop()`` at the last grid point, which only works inside ``optimize``: the trial
    is stored all the same, and the loop itself sees when the grid is done."""
    with stop.deferred():
        try:
            study.tell(trial, values, state=state)
        except RuntimeError as e:
            if "Study.stop" not in str(e):
                raise


def fail(study: optuna.Study, trial: optuna.Trial, reason: str, stop: StopSignals
         ) -> TrialState:
    """FAIL the trial, its reason kept on it and said on the console."""
    trial.set_user_attr(REASON_ATTR, reason[:2000])
    tell(study, trial, stop, state=TrialState.FAIL)
    log.info(f"mlflow-dlaas: trial {trial.number} failed: {reason}")
    return TrialState.FAIL


def complete(study: optuna.Study, trial: optuna.Trial, spec: StudySpec, experiment_id: str,
             trial_params: dict[str, Any], outcomes: list[ChildOutcome], stop: StopSignals
             ) -> TrialState:
    """Tell the trial its values (medians over its replicates' runs), its constraints and
    its note; FAIL it where a run lacks an objective or the value is not a number."""
    values, spreads, missing = aggregate(spec, outcomes)
    missing += [c.metric for c in spec.constraints
                if median_of(outcomes, c.metric) is None and c.metric not in missing]
    if missing:
        available = ", ".join(sorted(outcomes[0].metrics))
        return fail(study, trial, f"the trial did not log {', '.join(missing)}; it logged: "
                                  f"{available}", stop)
    not_finite = [f"{o.metric} = {v}" for o, v in zip(spec.objectives, values, strict=True)
                  if not math.isfinite(v)]
    if not_finite:  # Optuna would fail the trial itself, with a warning and no reason kept
        return fail(study, trial, f"the trial's objective is not a number: "
                                  f"{', '.join(not_finite)}", stop)
    for key, spread in spreads.items():
        trial.set_user_attr(f"range_{key}", spread)
    observed = [median_of(outcomes, c.metric) or 0.0 for c in spec.constraints]
    if spec.constraints:
        record_constraints(study, trial_id(trial),
                           [c.violation(v) for c, v in zip(spec.constraints, observed,
                                                           strict=True)])
    save_trial_note(trial, trial_note(spec, trial_params, [
        (o.run_id, run_url(experiment_id, o.run_id)) for o in outcomes], values, observed))
    tell(study, trial, stop, values)
    return TrialState.COMPLETE


def aggregate(spec: StudySpec, outcomes: list[ChildOutcome]
              ) -> tuple[list[float], dict[str, list[float]], list[str]]:
    """Median of each objective over replicates, the replicates' [min, max], what is missing."""
    values, spreads, missing = [], {}, []
    for objective in spec.objectives:
        seen = [objective_value(o, objective) for o in outcomes]
        if any(v is None for v in seen):
            missing.append(objective.metric)
            continue
        values.append(statistics.median(seen))
        spreads[objective.metric] = [min(seen), max(seen)]
    return values, spreads, missing


def median_of(outcomes: list[ChildOutcome], key: str) -> float | None:
    """The metric's median over the replicates' runs; None where one lacks it."""
    seen = [metric_value(o.metrics, key) for o in outcomes]
    return None if any(v is None for v in seen) else statistics.median(seen)
