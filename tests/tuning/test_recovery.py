"""A worker killed mid-trial leaves no trial RUNNING for ever."""

from __future__ import annotations

import time

import mlflow
import optuna
from optuna.trial import TrialState

from mlflow_dlaas.tuning import study as driver


def test_stale_running_trials_are_failed_and_retried_once(tracking: str) -> None:
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage())
    lost = study.ask({"x": optuna.distributions.IntDistribution(0, 9)})
    run = mlflow.MlflowClient().create_run(
        mlflow.get_experiment_by_name(tracking).experiment_id)
    lost.set_user_attr(driver.RUN_IDS_ATTR, [run.info.run_id])
    lost.set_user_attr(driver.HEARTBEAT_ATTR, time.time() - driver.STALE_AFTER_S - 1)
    alive = study.ask({"x": optuna.distributions.IntDistribution(0, 9)})
    alive.set_user_attr(driver.HEARTBEAT_ATTR, time.time())

    driver._recover_stale_trials(study)

    trials = study.get_trials()
    assert trials[lost.number].state == TrialState.FAIL
    assert "no heartbeat" in trials[lost.number].user_attrs[driver.REASON_ATTR]
    assert trials[alive.number].state == TrialState.RUNNING
    (retry,) = study.get_trials(states=(TrialState.WAITING,))
    assert retry.system_attrs["fixed_params"] == trials[lost.number].params  # replayed on ask
    assert retry.user_attrs[driver.RETRY_OF_ATTR] == lost.number
    assert mlflow.MlflowClient().get_run(run.info.run_id).info.status == "FAILED"

    driver._recover_stale_trials(study)  # idempotent: nothing more to do
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 1
