"""Where a study stands, for its driver and its user: the next step (ask a trial, wait for
other workers, done), a grid's coverage by value, and one console line per finished trial."""

from __future__ import annotations

import time

import optuna
from optuna.trial import TrialState

from mlflow_dlaas.console_log import console
from mlflow_dlaas.figures import significant
from mlflow_dlaas.tuning.feasibility import best_trials, describe_violations, is_feasible
from mlflow_dlaas.tuning.grid import GridByValue
from mlflow_dlaas.tuning.recovery import counts
from mlflow_dlaas.tuning.sampling import grid_space
from mlflow_dlaas.tuning.spec import StudySpec

log = console(__name__)


def grid_coverage(study: optuna.Study, spec: StudySpec) -> str:
    """``; grid: 4 of 4 points measured`` for a grid study, counted by value (the parent
    run's metrics ``grid_points_measured`` and ``grid_points``)."""
    if spec.sampler != "grid":
        return ""
    grid = GridByValue(grid_space(spec))
    measured = grid.measured(study.get_trials(deepcopy=False))
    return f"; grid: {measured} of {len(grid.points)} points measured"


def next_step(study: optuna.Study, spec: StudySpec, started: float) -> str:
    """``ask`` a trial, ``wait`` for other workers' trials, or ``done``.

    Trials given up (their worker stopped) do not count; their retries, waiting in the
    queue, are asked first. A grid study is done when every grid point has a trial.
    """
    trials = study.get_trials(deepcopy=False)
    counted = sum(counts(t) for t in trials)
    running = sum(t.state == TrialState.RUNNING for t in trials)
    if spec.n_trials is not None and counted >= spec.n_trials:
        return "done"
    if spec.timeout_s is not None and time.monotonic() - started >= spec.timeout_s:
        return "done"
    if any(t.state == TrialState.WAITING for t in trials):
        return "ask"
    room = spec.n_trials is None or counted + running < spec.n_trials
    if room and (spec.sampler != "grid" or grid_points_left(spec, trials)):
        return "ask"
    return "wait" if running else "done"


def grid_points_left(spec: StudySpec, trials: list[optuna.trial.FrozenTrial]) -> int:
    """Grid points no trial holds yet, by value."""
    return len(GridByValue(grid_space(spec)).missing(trials))


class Progress:
    """One console line per finished trial: its settings and outcome, best so far, time
    left."""

    def __init__(self, spec: StudySpec, started: float) -> None:
        self.spec = spec
        self.started = started
        self.done_here = 0

    def report(self, study: optuna.Study, number: int, state: TrialState) -> None:
        self.done_here += 1
        trials = study.get_trials(deepcopy=False)
        finished = sum(counts(t) for t in trials)
        elapsed = time.monotonic() - self.started
        per_trial = elapsed / self.done_here
        left = ""
        if self.spec.n_trials:
            remaining = max(self.spec.n_trials - finished, 0)
            left = f", about {remaining * per_trial / 60:.1f} min left"
            total = f"/{self.spec.n_trials}"
        else:
            total = ""
        best = ""
        found = best_trials(study, self.spec)
        if found and not self.spec.multi_objective:
            best = f", best {significant(found[0].values[0])} (trial {found[0].number})"
        elif found:
            best = f", Pareto front {len(found)}"
        elif any(t.state == TrialState.COMPLETE for t in trials) and self.spec.constraints:
            best = ", no feasible trial yet"
        searched = " ".join(f"{k}={short(v)}" for k, v in trials[number].params.items())
        log.info(f"[{finished}{total}] trial {number} {state.name}"
                 f"{f' [{searched}]' if searched else ''}{self._outcome(trials[number])}{best}, "
                 f"{elapsed / 60:.1f} min{left}")

    def _outcome(self, trial: optuna.trial.FrozenTrial) -> str:
        """``: accuracy 0.9312`` and, where it missed a constraint, which and by how much."""
        if trial.state != TrialState.COMPLETE or not trial.values:
            return ""
        values = ", ".join(f"{o.metric} {significant(v)}"
                           for o, v in zip(self.spec.objectives, trial.values, strict=False))
        missed = "" if is_feasible(trial) else \
            f" (infeasible: {describe_violations(self.spec.constraints, trial)})"
        return f": {values}{missed}"


def short(value: object) -> str:
    """A sampled value as a person reads it: a float at four significant digits
    (``0.003162`` for a log-uniform learning rate), anything else as it is."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)
