"""A trial whose runs reached the tracking server only later (``mlflow-dlaas resend``) is
completed by the study's next run, once, with its runs' figures; it never counts twice."""

from __future__ import annotations

import mlflow
import optuna
from mlflow.entities import Metric
from optuna.trial import TrialState

from mlflow_dlaas.measured_process.lifeline import StopSignals
from mlflow_dlaas.tuning import recovery
from mlflow_dlaas.tuning import study as driver
from mlflow_dlaas.tuning.delivery import DELIVERED_FROM_ATTR, UNDELIVERED_ATTR
from mlflow_dlaas.tuning.progress import grid_points_left
from mlflow_dlaas.tuning.sampling import make_sampler, suggest
from mlflow_dlaas.tuning.spec import parse_spec
from mlflow_dlaas.tuning.trial_runner import UNDELIVERED_REASON

ACCURACY = "Headline/test_accuracy"


def _undelivered_trial(study: optuna.Study, spec, experiment_id: str, status: str) -> int:
    """A trial failed as the driver fails one whose run's results stayed in its journal;
    its run is on the server now, ``status``."""
    client = mlflow.MlflowClient()
    run = client.create_run(experiment_id)
    client.log_batch(run.info.run_id, metrics=[Metric(ACCURACY, 0.93, 0, 0)])
    client.set_terminated(run.info.run_id, status)
    trial = study.ask()
    suggest(trial, spec)
    trial.set_user_attr(recovery.RUN_IDS_ATTR, [run.info.run_id])
    trial.set_user_attr(UNDELIVERED_ATTR, True)
    trial.set_user_attr(recovery.REASON_ATTR, UNDELIVERED_REASON)
    study.tell(trial, state=TrialState.FAIL)
    return trial.number


def test_a_resent_trial_becomes_complete_on_the_next_run(tracking: str) -> None:
    spec = parse_spec({"name": "d", "frameworks": ["pytorch"], "sampler": "grid",
                       "n_trials": 2, "search_space": {"batch_size": [32, 64]},
                       "objectives": [{"metric": "accuracy", "direction": "maximize"}]})
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage(),
                                sampler=make_sampler(spec), direction="maximize")
    experiment_id = mlflow.get_experiment_by_name(tracking).experiment_id
    waiting = _undelivered_trial(study, spec, experiment_id, "RUNNING")  # not resent yet
    driver._complete_delivered(study, spec, experiment_id, StopSignals())
    assert [t.state for t in study.get_trials()] == [TrialState.FAIL]
    assert recovery.counts(study.get_trials()[waiting])  # a failure, until its runs arrive

    mlflow.MlflowClient().set_terminated(
        study.get_trials()[waiting].user_attrs[recovery.RUN_IDS_ATTR][0], "FINISHED")
    for _ in range(2):  # the next run completes it; a second one does nothing more
        driver._complete_delivered(study, spec, experiment_id, StopSignals())
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE]
    failed, complete = trials
    assert complete.values == [0.93] and complete.params == failed.params
    assert complete.user_attrs[DELIVERED_FROM_ATTR] == failed.number
    assert sum(recovery.counts(t) for t in trials) == 1  # the pair counts once
    assert grid_points_left(spec, trials) == 1  # its point measured, the other not


def test_a_trial_failed_during_an_outage_leaves_its_point_to_the_next_run(tracking: str
                                                                          ) -> None:
    """An own project's ``mlflow.log_metric`` raises while the server is away, so its trial
    failed "on its own" and the grid never measured that point again (5 of 6). A failure
    seen during an outage holds no point and counts for nothing: the next run measures it."""
    from mlflow_dlaas.tuning.grid import OUTAGE_ATTR
    from mlflow_dlaas.tuning.trial_runner import OUTAGE_REASON

    spec = parse_spec({"name": "o", "frameworks": ["pytorch"], "sampler": "grid",
                       "n_trials": 2, "search_space": {"batch_size": [32, 64]},
                       "objectives": [{"metric": "accuracy", "direction": "maximize"}]})
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage(),
                                sampler=make_sampler(spec), direction="maximize")
    for attrs in ({}, {OUTAGE_ATTR: True}):
        trial = study.ask()
        suggest(trial, spec)
        for key, value in {**attrs, recovery.REASON_ATTR: OUTAGE_REASON if attrs else "own"
                           }.items():
            trial.set_user_attr(key, value)
        study.tell(trial, state=TrialState.FAIL)
    own, outage = study.get_trials()
    assert own.params["batch_size"] != outage.params["batch_size"]
    assert not recovery.counts(outage) and recovery.counts(own)
    assert grid_points_left(spec, study.get_trials()) == 1  # the outage's point
    retry = study.ask()
    assert suggest(retry, spec)["batch_size"] == outage.params["batch_size"]


def test_the_server_going_away_is_counted_once_per_outage() -> None:
    from mlflow_dlaas.store.journaled_store import Courier

    courier = Courier("http://127.0.0.1:9")
    for _ in range(3):  # one outage, however many calls fail in it
        courier._went_away(ConnectionError("refused"))
    courier._came_back()
    courier._went_away(ConnectionError("refused"))
    assert courier.outages == 2
