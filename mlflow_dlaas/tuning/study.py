"""The study driver: ask Optuna, run each trial as child runs, tell Optuna, resume, recover."""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass
from typing import Any

import mlflow
import optuna
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NOTE as NOTE_TAG
from optuna.trial import TrialState

from mlflow_dlaas.console_log import console, verbose
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.measured_process.lifeline import StopSignals, stop_on_signals
from mlflow_dlaas.optuna_access.internals import storage_of, trial_id
from mlflow_dlaas.optuna_access.pruners import make_pruner
from mlflow_dlaas.optuna_access.storage import absolute_url, check_storage_url, make_storage
from mlflow_dlaas.runs.schema import REASON_TAG, SKIPPED_TAG
from mlflow_dlaas.store.experiments import ensure_experiment
from mlflow_dlaas.store.interrupted_writes import release_interrupted_statements
from mlflow_dlaas.store.ownership import owner_tags
from mlflow_dlaas.store.run_ending import end_run
from mlflow_dlaas.store.tracking import configure_tracking
from mlflow_dlaas.tuning.delivery import DELIVERED_FROM_ATTR, UNDELIVERED_ATTR, delivered_outcomes
from mlflow_dlaas.tuning.feasibility import closest_infeasible, describe_violations
from mlflow_dlaas.tuning.grid import GridByValue
from mlflow_dlaas.tuning.interleaving import batch_size, measure_in_rounds
from mlflow_dlaas.tuning.measurable import skipped_text, skipped_trials
from mlflow_dlaas.tuning.outcome import NoTrialCompletedError, no_completion_reason
from mlflow_dlaas.tuning.parent_run import claim_parent, parent_run
from mlflow_dlaas.tuning.progress import Progress, grid_coverage, next_step
from mlflow_dlaas.tuning.recovery import OWNER_ATTR, RUN_IDS_ATTR, give_up, recover_stale_trials
from mlflow_dlaas.tuning.sampling import changed_since_begun, grid_space, make_sampler, suggest
from mlflow_dlaas.tuning.shared_machine import SharedMachineNotice
from mlflow_dlaas.tuning.spec import StudySpec, project_name
from mlflow_dlaas.tuning.study_artifacts import log_study_artifacts
from mlflow_dlaas.tuning.telling import complete
from mlflow_dlaas.tuning.trial_in_flight import StudyPlace, TrialInFlight
from mlflow_dlaas.tuning.warm_start import earlier_study, record_fingerprint, warm_start

log = console(__name__)

#: How often a worker with nothing to ask looks again at the trials other workers run.
OTHERS_POLL_S = 2.0


@dataclass(frozen=True)
class StudySummary:
    study_name: str
    parent_run_id: str
    complete: int
    failed: int
    pruned: int
    best: list[dict[str, Any]]
    #: why the study has no result (no trial completed), else None
    failure: str | None = None


def run_study(spec: StudySpec, *, storage_url: str | None = None) -> StudySummary:
    """Run (or resume) the study until ``n_trials`` trials count, the grid is measured, or
    ``timeout_s`` passes.

    Any number of workers may run this at once on one storage; they share one parent run.
    SIGINT, SIGTERM and SIGHUP stop it as Ctrl-C does: the trial's process tree is stopped,
    the trial FAILS (to be retried by the next run) and the parent run ends KILLED.
    """
    if not verbose():  # ours say it: "[2/8] trial 1 ...", "trial 1 failed: <why>"
        optuna.logging.set_verbosity(optuna.logging.ERROR)
    check_storage_url(storage_url)  # a bad --storage makes nothing, not even ./mlflow.db
    with stop_on_signals(escalate=True) as stop:  # before the first store write
        target = configure_tracking()
        storage, where = make_storage(storage_url)
        earlier = earlier_study(storage, spec) if spec.warm_start else None  # before any run
        reachable_url = absolute_url(storage_url)  # for the trials' own processes (pruning)
        log.info(f"mlflow-dlaas: study {spec.name!r} in {where}")
        launcher = os.environ.get("MLFLOW_RUN_ID")  # under `mlflow run . -e study`
        experiment_id = (mlflow.MlflowClient().get_run(launcher).info.experiment_id
                         if launcher else ensure_experiment(spec.experiment or spec.name))
        study: optuna.Study | None = None
        parent_id: str | None = None
        held: list[TrialInFlight] = []
        try:
            with stop.deferred():  # a parent run made is a parent run the study knows
                study, created = _create_or_load(spec, storage)
                if created:
                    record_fingerprint(study)
                    if earlier is not None:
                        log.info(f"mlflow-dlaas: {warm_start(study, spec, earlier)}")
                parent_id = parent_run(study, spec, experiment_id, created)
            started = time.monotonic()
            progress = Progress(spec, started)
            neighbours = SharedMachineNotice()
            while True:
                stop.check()  # a stop Python dropped (raised in a weakref callback) lands here
                claim_parent(parent_id)
                recover_stale_trials(study)
                _complete_delivered(study, spec, experiment_id, stop)
                step = next_step(study, spec, started)
                if step == "done":
                    break
                if step == "wait":
                    time.sleep(OTHERS_POLL_S)
                    continue
                place = StudyPlace(study, spec, experiment_id, parent_id, reachable_url, stop)
                held = _ask_cells(place, started)
                neighbours.check(study, held[0].number)
                measure_in_rounds([c for c in held if not c.skip_if_unmeasurable()], spec)
                for cell in held:
                    progress.report(study, cell.number, cell.finish())
                held = []
            summary = _finish(study, spec, parent_id)
        except BaseException as e:
            _abandon(study, [c.trial for c in held], parent_id, e)
            raise
    log.info(f"mlflow-dlaas: study done: {summary.complete} complete, {summary.pruned} pruned, "
             f"{summary.failed} failed{grid_coverage(study, spec)}; parent run {parent_id}")
    skipped = skipped_trials(study.get_trials(deepcopy=False))
    if skipped:
        log.info(f"mlflow-dlaas: skipped on this machine, nothing run: {skipped_text(skipped)}")
    _say_if_none_feasible(study, spec, summary)
    log.info(f"mlflow-dlaas: to browse: {target.ui_command()}")
    if summary.failure is not None:
        raise NoTrialCompletedError(f"study {spec.name!r}: {summary.failure}")
    return summary


def _ask_cells(place: StudyPlace, started: float) -> list[TrialInFlight]:
    """The trials this worker measures next: one, or (:func:`~mlflow_dlaas.tuning.
    interleaving.batch_size`) as many as the study has room for, to be measured in
    interleaved rounds."""
    cells: list[TrialInFlight] = []
    while not cells or (len(cells) < batch_size(place.spec)
                        and next_step(place.study, place.spec, started) == "ask"):
        with place.stop.deferred():  # never a trial without its owner and parameters
            trial = place.study.ask()
            trial.set_user_attr(OWNER_ATTR, owner_tags())
        cells.append(TrialInFlight(place, trial))
    return cells


def _complete_delivered(study: optuna.Study, spec: StudySpec, experiment_id: str,
                        stop: StopSignals) -> None:
    """Each failed trial whose runs the tracking server did not take, and which have since
    arrived (``mlflow-dlaas resend``), all FINISHED: a COMPLETE trial with its settings and
    its runs' figures (:data:`DELIVERED_FROM_ATTR`: the failed one's number) stands beside
    it (Optuna cannot change a finished trial's state); the pair counts once."""
    client = mlflow.MlflowClient()
    trials = study.get_trials(deepcopy=False)
    done = {t.user_attrs.get(DELIVERED_FROM_ATTR) for t in trials}
    for failed in trials:
        if (failed.state != TrialState.FAIL or not failed.user_attrs.get(UNDELIVERED_ATTR)
                or failed.number in done):
            continue
        outcomes = delivered_outcomes(client, failed.user_attrs.get(RUN_IDS_ATTR, []),
                                      spec.replicates)
        if outcomes is None:
            continue
        with stop.deferred():
            study.enqueue_trial(failed.params, user_attrs={DELIVERED_FROM_ATTR: failed.number})
            trial = study.ask()
            trial.set_user_attr(OWNER_ATTR, owner_tags())
        params = suggest(trial, spec)
        framework = params.pop("framework", spec.frameworks[0]) if spec.frameworks else \
            project_name(spec.project)
        trial.set_user_attr("framework", framework)
        trial.set_user_attr(RUN_IDS_ATTR, [o.run_id for o in outcomes])
        state = complete(study, trial, spec, experiment_id, {**spec.fixed, **params},
                         outcomes, stop)
        log.info(f"mlflow-dlaas: trial {failed.number}'s runs have arrived: trial {trial.number} "
                 f"holds them, {state.name}")


def _say_if_none_feasible(study: optuna.Study, spec: StudySpec, summary: StudySummary) -> None:
    """A constrained study whose complete trials all miss a constraint names no best trial."""
    if not spec.constraints or summary.best or not summary.complete:
        return
    closest = closest_infeasible(study)
    log.info(f"mlflow-dlaas: no trial met the constraints, so none is named best; the closest "
             f"was trial {closest.number} ({describe_violations(spec.constraints, closest)})")


def _create_or_load(spec: StudySpec, storage: optuna.storages.BaseStorage
                    ) -> tuple[optuna.Study, bool]:
    """The study, and whether this worker created it (then it creates the parent run)."""
    kwargs = {"study_name": spec.name, "storage": storage, "sampler": make_sampler(spec),
              "pruner": make_pruner(spec.pruner)}
    try:
        study = optuna.create_study(directions=spec.directions, **kwargs)
        _name_objectives(study, spec)
        return study, True
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(**kwargs)
        study.sampler = make_sampler(spec, len(study.get_trials(deepcopy=False)))
    found = [d.name.lower() for d in study.directions]
    if found != spec.directions:
        raise ConfigError(f"study {spec.name!r} exists with directions {found}, the spec asks "
                          f"{spec.directions}; give the study a new name to start afresh")
    changed = changed_since_begun(spec, study.get_trials(deepcopy=False))
    if changed:
        raise ConfigError(f"study {spec.name!r} began with another search space, which Optuna "
                          f"keeps per parameter ({'; '.join(changed)}); restore it, or give "
                          "the study a new name to start afresh")
    if study.metric_names is None:  # made before the names were set
        _name_objectives(study, spec)
    return study, False


def _name_objectives(study: optuna.Study, spec: StudySpec) -> None:
    """The objectives' metric keys (units in their names) as Optuna's metric names, which
    optuna-dashboard shows instead of "Objective 0"."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([o.metric for o in spec.objectives])


def _abandon(study: optuna.Study | None, held: list[optuna.Trial], parent_id: str | None,
             error: BaseException) -> None:
    """This worker is stopping: give the trials it holds up (to be retried); end the parent
    run if no other worker runs a trial."""
    reason = f"the study worker stopped: {type(error).__name__}: {error}"
    release_interrupted_statements(error)
    if study is None or parent_id is None:  # stopped before the study had its parent run
        return
    try:
        for trial in held:
            frozen = storage_of(study).get_trial(trial_id(trial))
            if frozen.state == TrialState.RUNNING:
                give_up(study, frozen, reason)
        if not study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            end_run(mlflow.MlflowClient(), parent_id,
                    "KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED", reason)
    except Exception:  # the storage or the store is what failed: the next run recovers
        pass  # the trial (its owner is gone) and the sweep of dead owners ends the runs


def _finish(study: optuna.Study, spec: StudySpec, parent_id: str) -> StudySummary:
    """Log the outcome to the parent run; end it (FAILED when no trial completed) unless
    another worker still runs a trial."""
    trials = study.get_trials(deepcopy=False)
    count = {s: sum(t.state == s for t in trials) for s in TrialState}
    best = log_study_artifacts(study, spec, parent_id)
    client = mlflow.MlflowClient()
    client.log_metric(parent_id, "trials_complete", count[TrialState.COMPLETE])
    client.log_metric(parent_id, "trials_failed", count[TrialState.FAIL])
    client.log_metric(parent_id, "trials_pruned", count[TrialState.PRUNED])
    if spec.sampler == "grid":  # by value: distinct points measured, of the grid's
        grid = GridByValue(grid_space(spec))
        client.log_metric(parent_id, "grid_points_measured", grid.measured(trials))
        client.log_metric(parent_id, "grid_points", len(grid.points))
    skipped = skipped_trials(trials)
    client.log_metric(parent_id, "trials_skipped_here", len(skipped))
    if skipped:  # the tag for searches; the run's description for a person
        client.set_tag(parent_id, SKIPPED_TAG, skipped_text(skipped))
        client.set_tag(parent_id, NOTE_TAG, "Skipped unmeasured on the machine that ran "
                                            f"this study: {skipped_text(skipped)}")
    failure = None
    if not count[TrialState.RUNNING]:
        failure = no_completion_reason(trials)
        if failure is not None:
            end_run(client, parent_id, "FAILED", failure)
        else:
            if REASON_TAG in client.get_run(parent_id).data.tags:  # of an earlier, stopped run
                client.delete_tag(parent_id, REASON_TAG)
            client.set_terminated(parent_id, "FINISHED")
    return StudySummary(spec.name, parent_id, count[TrialState.COMPLETE],
                        count[TrialState.FAIL], count[TrialState.PRUNED], best, failure)
