"""One asked trial on its way through its replicates: its settings, its child runs so far,
its heartbeat, and how it ends (skipped here, pruned, failed or complete)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlflow
import optuna
from mlflow.entities import Param
from optuna.trial import TrialState

from mlflow_dlaas.console_log import console
from mlflow_dlaas.measured_process.lifeline import StopSignals
from mlflow_dlaas.optuna_access.internals import trial_id
from mlflow_dlaas.optuna_access.pruning_request import PruningRequest
from mlflow_dlaas.own_project.settings import (
    OUTSIDE_SETTINGS,
    outside_environment,
    split_settings,
)
from mlflow_dlaas.own_project.watch import OutsideWatch
from mlflow_dlaas.project_paths import projects_dir
from mlflow_dlaas.runs.schema import (
    ENTRY_TAG,
    HOST_CLASS_TAG,
    PROJECT_TAG,
    REPLICATE_TAG,
    ROLE_TAG,
    STUDY_TAG,
    TRIAL_NAME_TAG,
    TRIAL_NUMBER_TAG,
)
from mlflow_dlaas.runs.ui_links import run_url
from mlflow_dlaas.tuning.delivery import UNDELIVERED_ATTR
from mlflow_dlaas.tuning.grid import OUTAGE_ATTR, SKIPPED_ATTR
from mlflow_dlaas.tuning.measurable import skip_reason
from mlflow_dlaas.tuning.recovery import HEARTBEAT_ATTR, RUN_IDS_ATTR
from mlflow_dlaas.tuning.sampling import suggest
from mlflow_dlaas.tuning.spec import PRUNING_METRIC, StudySpec, project_name, replicate_seed
from mlflow_dlaas.tuning.telling import complete, fail, tell
from mlflow_dlaas.tuning.trial_runner import (
    OUTAGE_REASON,
    UNDELIVERED_REASON,
    ChildOutcome,
    run_child,
)

log = console(__name__)

#: The trial's (first replicate's) MLflow run, and its page in the MLflow UI.
RUN_ID_ATTR = "mlflow_run_id"
RUN_URL_ATTR = "mlflow_run_url"
HEARTBEAT_EVERY_S = 5.0


@dataclass(frozen=True)
class StudyPlace:
    """Where a study's trials go: the study, its spec, the experiment, the parent run, the
    storage URL the trials' own processes reach (pruning), and the stop signals."""

    study: optuna.Study
    spec: StudySpec
    experiment_id: str
    parent_id: str
    storage_url: str
    stop: StopSignals


class TrialInFlight:
    """A trial asked from Optuna, measured one replicate at a time; :attr:`state` is None
    until it is told (pruned or failed by a replicate, or :meth:`finish`)."""

    def __init__(self, place: StudyPlace, trial: optuna.Trial) -> None:
        self.place = place
        self.trial = trial
        spec = place.spec
        params = suggest(trial, spec)
        self.framework = params.pop("framework", spec.frameworks[0]) if spec.frameworks \
            else project_name(spec.project)
        trial.set_user_attr("framework", self.framework)
        self.params = {**spec.fixed, **params}
        self.outcomes: list[ChildOutcome] = []
        self.run_ids: list[str] = []
        self.state: TrialState | None = None
        self._last_beat = 0.0
        self.beat()

    @property
    def number(self) -> int:
        return self.trial.number

    def skip_if_unmeasurable(self) -> bool:
        """Prune the trial unmeasured where this machine would only emulate its point."""
        skipped = skip_reason(self.place.spec, self.framework, self.params)
        if not skipped:
            return False
        self.trial.set_user_attr(SKIPPED_ATTR, skipped)
        self._tell(state=TrialState.PRUNED)
        log.info(f"mlflow-dlaas: trial {self.number} skipped, nothing run: {skipped}")
        return True

    def beat(self) -> None:
        """Refresh the trial's heartbeat (at most every :data:`HEARTBEAT_EVERY_S`)."""
        if time.monotonic() - self._last_beat >= HEARTBEAT_EVERY_S:
            self.trial.set_user_attr(HEARTBEAT_ATTR, time.time())
            self._last_beat = time.monotonic()

    def run_replicate(self, replicate: int, heartbeat: Callable[[], None]) -> None:
        """Measure one replicate as a child run; a pruned or failed one ends the trial.
        ``heartbeat`` is called while the child runs (every trial the worker holds beats)."""
        place, spec = self.place, self.place.spec
        launch = _child_launch(spec, self.framework, self.params, replicate)
        # the first replicate reports its epochs to the trial and is pruned from inside
        pruning = PruningRequest(
            storage=place.storage_url, study=spec.name, trial_id=trial_id(self.trial),
            pruner=spec.pruner, metric=PRUNING_METRIC[spec.entry_point],
        ).environment() if spec.pruner != "none" and replicate == 0 else {}
        outcome = run_child(
            experiment_id=place.experiment_id, parent_run_id=place.parent_id,
            project_uri=launch.project_uri, entry_point=spec.entry_point, params=launch.params,
            tags={STUDY_TAG: spec.name, TRIAL_NUMBER_TAG: str(self.number),
                  REPLICATE_TAG: str(replicate), ROLE_TAG: "trial",
                  TRIAL_NAME_TAG: f"trial-{self.number}-r{replicate}", **launch.tags,
                  **({HOST_CLASS_TAG: spec.host_class} if spec.host_class else {})},
            env_manager=spec.env_manager, timeout_s=spec.trial_timeout_s,
            environment={**pruning, **launch.environment},
            heartbeat=heartbeat, on_created=self._on_created, watch=launch.watch,
        )
        self.outcomes.append(outcome)
        if outcome.status == "PRUNED":
            self._tell(state=TrialState.PRUNED)
        elif outcome.status != "FINISHED":
            if outcome.reason == UNDELIVERED_REASON:  # its runs may arrive by resend
                self.trial.set_user_attr(UNDELIVERED_ATTR, True)
            if outcome.reason.startswith(OUTAGE_REASON):  # measured again on the next run
                self.trial.set_user_attr(OUTAGE_ATTR, True)
            self.state = fail(place.study, self.trial, outcome.reason, place.stop)

    def finish(self) -> TrialState:
        """Tell the trial its values once every replicate ran (or its state if ended)."""
        if self.state is None:
            place = self.place
            self.state = complete(place.study, self.trial, place.spec, place.experiment_id,
                                  self.params, self.outcomes, place.stop)
        return self.state

    def _on_created(self, run_id: str) -> None:
        """Recorded before the run's process starts."""
        if self.place.spec.project:  # the settings applied around the project, beside its params
            mlflow.MlflowClient().log_batch(run_id, params=[
                Param(k, str(v)) for k, v in self.params.items() if k in OUTSIDE_SETTINGS])
        self.run_ids.append(run_id)
        self.trial.set_user_attr(RUN_IDS_ATTR, list(self.run_ids))
        if len(self.run_ids) == 1:
            self.trial.set_user_attr(RUN_ID_ATTR, run_id)
            self.trial.set_user_attr(RUN_URL_ATTR, run_url(self.place.experiment_id, run_id))

    def _tell(self, state: TrialState) -> None:
        tell(self.place.study, self.trial, self.place.stop, state=state)
        self.state = state


@dataclass(frozen=True)
class _ChildLaunch:
    """What one replicate's child is: the project, its params, tags and environment, and
    the watch around it (a user's project only)."""

    project_uri: str
    params: dict[str, Any]
    tags: dict[str, str]
    environment: dict[str, str]
    watch: OutsideWatch | None = None


def _child_launch(spec: StudySpec, framework: str, trial_params: dict[str, Any],
                  replicate: int) -> _ChildLaunch:
    """A built-in project (``projects/<framework>``) with the replicate's seed, or the user's
    own project with our settings taken out of its params and applied around it."""
    seed = replicate_seed(trial_params, replicate, spec.replicate_seeds)
    if not spec.project:
        return _ChildLaunch(str(projects_dir() / framework), {**trial_params, "seed": seed},
                            {}, {})
    settings, params = split_settings(trial_params)
    if "seed" in spec.project_parameters:
        params["seed"] = seed
    return _ChildLaunch(spec.project, params,
                        {ENTRY_TAG: "project", PROJECT_TAG: framework},
                        outside_environment(settings), OutsideWatch(settings))
