"""The study driver: ask Optuna, run each trial as child runs, tell Optuna, resume, recover."""

from __future__ import annotations

import os
import socket
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

import mlflow
import optuna
from mlflow.entities import Param
from optuna.trial import TrialState

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.tracking import configure_tracking, ensure_experiment
from mlflow_dlaas.tuning.sampling import CONSTRAINTS_ATTR, make_pruner, make_sampler, suggest
from mlflow_dlaas.tuning.spec import PRUNING_METRIC, StudySpec, replicate_seed
from mlflow_dlaas.tuning.storage import make_storage
from mlflow_dlaas.tuning.study_artifacts import log_study_artifacts
from mlflow_dlaas.tuning.trial_runner import ChildOutcome, metric_value, run_child

PARENT_ATTR = "mlflow_parent_run_id"
HEARTBEAT_ATTR = "dlaas_heartbeat"
RUN_IDS_ATTR = "mlflow_run_ids"
REASON_ATTR = "fail_reason"
RETRY_OF_ATTR = "retry_of"
HEARTBEAT_EVERY_S = 5.0
STALE_AFTER_S = 60.0
PARENT_WAIT_S = 60.0


@dataclass(frozen=True)
class StudySummary:
    study_name: str
    parent_run_id: str
    complete: int
    failed: int
    pruned: int
    best: list[dict[str, Any]]


def run_study(spec: StudySpec, *, storage_url: str | None = None) -> StudySummary:
    """Run (or resume) the study until it has ``n_trials`` trials or ``timeout_s`` passes.

    Any number of workers may run this at once on one storage; they share one parent run.
    """
    target = configure_tracking()
    storage, where = make_storage(storage_url)
    print(f"mlflow-dlaas: study {spec.name!r} in {where}", file=sys.stderr)
    launcher = os.environ.get("MLFLOW_RUN_ID")  # under `mlflow run . -e study`
    experiment_id = (mlflow.MlflowClient().get_run(launcher).info.experiment_id if launcher
                     else ensure_experiment(spec.experiment or spec.name))
    study, created = _create_or_load(spec, storage)
    parent_id = _parent_run(study, spec, experiment_id, created)
    mlflow.MlflowClient().update_run(parent_id, status="RUNNING")
    started = time.monotonic()
    progress = _Progress(spec, started)
    while True:
        _recover_stale_trials(study)
        if spec.n_trials is not None and len(study.get_trials(deepcopy=False)) >= spec.n_trials:
            break
        if spec.timeout_s is not None and time.monotonic() - started >= spec.timeout_s:
            break
        trial = study.ask()
        try:
            state = _run_trial(study, trial, spec, experiment_id, parent_id)
        except _GridExhausted:
            progress.report(study, trial.number, study.trials[trial.number].state)
            break
        except BaseException as e:
            _abandon(study, trial, parent_id, e)
            raise
        progress.report(study, trial.number, state)
    summary = _finish(study, spec, parent_id)
    print(f"mlflow-dlaas: study done: {summary.complete} complete, {summary.pruned} pruned, "
          f"{summary.failed} failed; parent run {parent_id}", file=sys.stderr)
    print(f"mlflow-dlaas: to browse: {target.ui_command()}", file=sys.stderr)
    return summary


def _create_or_load(spec: StudySpec, storage: optuna.storages.BaseStorage
                    ) -> tuple[optuna.Study, bool]:
    """The study, and whether this worker created it (then it creates the parent run)."""
    kwargs = {"study_name": spec.name, "storage": storage, "sampler": make_sampler(spec),
              "pruner": make_pruner(spec)}
    try:
        return optuna.create_study(directions=spec.directions, **kwargs), True
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(**kwargs)
    found = [d.name.lower() for d in study.directions]
    if found != spec.directions:
        raise ConfigError(f"study {spec.name!r} exists with directions {found}, the spec asks "
                          f"{spec.directions}; give the study a new name to start afresh")
    return study, False


def _parent_run(study: optuna.Study, spec: StudySpec, experiment_id: str, created: bool) -> str:
    """The study's one parent run: made by the worker that created the study, found by others."""
    deadline = time.monotonic() + PARENT_WAIT_S
    while not created and time.monotonic() < deadline:
        existing = study.user_attrs.get(PARENT_ATTR)
        if existing:
            return existing
        time.sleep(0.5)
        study = optuna.load_study(study_name=spec.name, storage=study._storage)
    client = mlflow.MlflowClient()
    tags = {"dlaas.role": "study", "dlaas.study": spec.name, "dlaas.entry": "study"}
    launcher = os.environ.get("MLFLOW_RUN_ID")  # under `mlflow run . -e study`: that run
    if launcher:
        run = client.get_run(launcher)
        for key, value in tags.items():
            client.set_tag(launcher, key, value)
    else:
        run = client.create_run(experiment_id, run_name=spec.name, tags=tags)
    params = {"study_name": spec.name, "frameworks": ",".join(spec.frameworks),
              "entry_point": spec.entry_point, "sampler": spec.sampler, "pruner": spec.pruner,
              "n_trials": spec.n_trials, "timeout_s": spec.timeout_s,
              "replicates": spec.replicates, "replicate_seeds": spec.replicate_seeds,
              "env_manager": spec.env_manager,
              "objectives": ",".join(f"{o.direction}:{o.metric}" for o in spec.objectives)}
    params.update({f"fixed.{k}": v for k, v in spec.fixed.items()})
    client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()])
    study.set_user_attr(PARENT_ATTR, run.info.run_id)
    return run.info.run_id


def _run_trial(study: optuna.Study, trial: optuna.Trial, spec: StudySpec, experiment_id: str,
               parent_id: str) -> TrialState:
    params = suggest(trial, spec)
    framework = params.pop("framework", spec.frameworks[0])
    trial.set_user_attr("framework", framework)
    trial.set_user_attr("worker", f"{socket.gethostname()}:{os.getpid()}")
    last_beat = [0.0]

    def heartbeat() -> None:
        if time.monotonic() - last_beat[0] >= HEARTBEAT_EVERY_S:
            trial.set_user_attr(HEARTBEAT_ATTR, time.time())
            last_beat[0] = time.monotonic()

    heartbeat()
    outcomes: list[ChildOutcome] = []
    prunable = spec.pruner != "none"
    trial_params = {**spec.fixed, **params}
    for replicate in range(spec.replicates):

        def on_progress(metric: str, step: int, value: float) -> bool:
            if not prunable or metric != PRUNING_METRIC.get(spec.entry_point):
                return False
            trial.report(value, step)
            return trial.should_prune()

        outcome = run_child(
            experiment_id=experiment_id, parent_run_id=parent_id, framework=framework,
            entry_point=spec.entry_point,
            params={**trial_params,
                    "seed": replicate_seed(trial_params, replicate, spec.replicate_seeds)},
            tags={"dlaas.study": spec.name, "dlaas.trial_number": str(trial.number),
                  "dlaas.replicate": str(replicate), "dlaas.role": "trial",
                  "dlaas.trial_name": f"trial-{trial.number}-r{replicate}"},
            env_manager=spec.env_manager, timeout_s=spec.trial_timeout_s,
            on_progress=on_progress if replicate == 0 else None, heartbeat=heartbeat,
        )
        outcomes.append(outcome)
        trial.set_user_attr(RUN_IDS_ATTR, [o.run_id for o in outcomes])
        if outcome.status == "PRUNED":
            _tell(study, trial, state=TrialState.PRUNED)
            return TrialState.PRUNED
        if outcome.status != "FINISHED":
            return _fail(study, trial, outcome.reason)
    values, spreads, missing = _aggregate(spec, outcomes)
    if missing:
        available = ", ".join(sorted(outcomes[0].metrics))
        return _fail(study, trial, f"the trial did not log {', '.join(missing)}; it logged: "
                                   f"{available}")
    for key, spread in spreads.items():
        trial.set_user_attr(f"range_{key}", spread)
    if spec.constraints:
        violations = [c.violation(_median(outcomes, c.metric)) for c in spec.constraints]
        trial.set_user_attr(CONSTRAINTS_ATTR, violations)
    _tell(study, trial, values)
    return TrialState.COMPLETE


class _GridExhausted(Exception):
    """The grid sampler has visited every point; the trial was recorded."""


def _tell(study: optuna.Study, trial: optuna.Trial, values: list[float] | None = None,
          state: TrialState | None = None) -> None:
    """``study.tell``; Optuna's grid sampler calls ``study.stop()`` at the last grid point,
    which only works inside ``optimize``: the trial is stored all the same, so end the loop."""
    try:
        study.tell(trial, values, state=state)
    except RuntimeError as e:
        if "Study.stop" not in str(e):
            raise
        raise _GridExhausted from e


def _aggregate(spec: StudySpec, outcomes: list[ChildOutcome]
               ) -> tuple[list[float], dict[str, list[float]], list[str]]:
    """Median of each objective over replicates, the replicates' [min, max], what is missing."""
    values, spreads, missing = [], {}, []
    for objective in spec.objectives:
        seen = [metric_value(o.metrics, objective.metric) for o in outcomes]
        if any(v is None for v in seen):
            missing.append(objective.metric)
            continue
        values.append(statistics.median(seen))
        spreads[objective.metric] = [min(seen), max(seen)]
    return values, spreads, missing


def _median(outcomes: list[ChildOutcome], key: str) -> float | None:
    seen = [metric_value(o.metrics, key) for o in outcomes]
    return None if any(v is None for v in seen) else statistics.median(seen)


def _fail(study: optuna.Study, trial: optuna.Trial, reason: str) -> TrialState:
    trial.set_user_attr(REASON_ATTR, reason[:2000])
    _tell(study, trial, state=TrialState.FAIL)
    print(f"mlflow-dlaas: trial {trial.number} failed: {reason}", file=sys.stderr)
    return TrialState.FAIL


def _abandon(study: optuna.Study, trial: optuna.Trial, parent_id: str, error: BaseException
             ) -> None:
    """This worker is stopping mid-trial: fail the trial; end the parent if nothing else runs."""
    reason = f"the study worker stopped: {type(error).__name__}: {error}"
    if study.trials[trial.number].state == TrialState.RUNNING:
        _fail(study, trial, reason)
    if not study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        client = mlflow.MlflowClient()
        client.set_tag(parent_id, "dlaas.failure_reason", reason[:5000])
        client.set_terminated(parent_id, "KILLED" if isinstance(error, KeyboardInterrupt)
                              else "FAILED")


def _recover_stale_trials(study: optuna.Study) -> None:
    """Fail RUNNING trials whose worker stopped beating (killed), and retry each once."""
    now = time.time()
    client = mlflow.MlflowClient()
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        beat = frozen.user_attrs.get(HEARTBEAT_ATTR, frozen.datetime_start.timestamp())
        if now - beat < STALE_AFTER_S:
            continue
        storage = study._storage
        reason = f"worker {frozen.user_attrs.get('worker', '?')} stopped (no heartbeat)"
        try:
            storage.set_trial_user_attr(frozen._trial_id, REASON_ATTR, reason)
            if not storage.set_trial_state_values(frozen._trial_id, TrialState.FAIL):
                continue
        except RuntimeError:  # another worker recovered it first
            continue
        for run_id in frozen.user_attrs.get(RUN_IDS_ATTR, []):
            if client.get_run(run_id).info.status == "RUNNING":
                client.set_tag(run_id, "dlaas.failure_reason", reason)
                client.set_terminated(run_id, "FAILED")
        if RETRY_OF_ATTR not in frozen.user_attrs:
            study.enqueue_trial(frozen.params, user_attrs={RETRY_OF_ATTR: frozen.number})
        print(f"mlflow-dlaas: trial {frozen.number}: {reason}; marked FAILED", file=sys.stderr)


def _finish(study: optuna.Study, spec: StudySpec, parent_id: str) -> StudySummary:
    trials = study.get_trials(deepcopy=False)
    count = {s: sum(t.state == s for t in trials) for s in TrialState}
    best = log_study_artifacts(study, spec, parent_id)
    client = mlflow.MlflowClient()
    client.log_metric(parent_id, "trials_complete", count[TrialState.COMPLETE])
    client.log_metric(parent_id, "trials_failed", count[TrialState.FAIL])
    client.log_metric(parent_id, "trials_pruned", count[TrialState.PRUNED])
    if not count[TrialState.RUNNING]:
        client.set_terminated(parent_id, "FINISHED")
    return StudySummary(spec.name, parent_id, count[TrialState.COMPLETE],
                        count[TrialState.FAIL], count[TrialState.PRUNED], best)


class _Progress:
    """One console line per finished trial: done, best so far, time left."""

    def __init__(self, spec: StudySpec, started: float) -> None:
        self.spec = spec
        self.started = started
        self.done_here = 0

    def report(self, study: optuna.Study, number: int, state: TrialState) -> None:
        self.done_here += 1
        trials = study.get_trials(deepcopy=False)
        finished = sum(t.state.is_finished() for t in trials)
        elapsed = time.monotonic() - self.started
        per_trial = elapsed / self.done_here
        left = ""
        if self.spec.n_trials:
            remaining = max(self.spec.n_trials - len(trials), 0)
            left = f", about {remaining * per_trial / 60:.1f} min left"
            total = f"/{self.spec.n_trials}"
        else:
            total = ""
        best = ""
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        if complete and not self.spec.multi_objective:
            pick = max if self.spec.directions[0] == "maximize" else min
            best = f", best {pick(t.values[0] for t in complete):.4g}"
        elif complete:
            best = f", Pareto front {len(study.best_trials)}"
        print(f"[{finished}{total}] trial {number} {state.name}{best}, "
              f"{elapsed / 60:.1f} min{left}", file=sys.stderr)
