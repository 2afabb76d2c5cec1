"""The run's dataset input survives a study's workers logging the same data at once."""

from __future__ import annotations

import mlflow
import pytest
from mlflow.exceptions import MlflowException

from mlflow_dlaas.store import dataset_input
from mlflow_dlaas.store.dataset_input import log_dataset_input

REPORT = {"name": "mnist", "digest": "0123abcd", "input_shape": "1x28x28", "train_samples": 60,
          "test_samples": 10, "num_classes": 10, "data_dir": ""}
#: What MLflow's server answered in CI when two workers' runs inserted the dataset row at once.
LOST_RACE = ('BAD_REQUEST: (psycopg.errors.UniqueViolation) duplicate key value violates unique '
             'constraint "dataset_pk"')


def _datasets(run_id: str) -> list[tuple[str, str]]:
    inputs = mlflow.get_run(run_id).inputs.dataset_inputs
    return [(i.dataset.name, i.dataset.digest) for i in inputs]


def test_a_run_that_lost_the_insert_race_asks_again_and_keeps_its_input(
    tracking: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = mlflow.log_input
    calls = []

    def another_worker_inserts_first(*args, **kwargs) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise MlflowException(LOST_RACE)
        real(*args, **kwargs)

    with mlflow.start_run() as other:
        log_dataset_input(REPORT)
    monkeypatch.setattr(dataset_input.mlflow, "log_input", another_worker_inserts_first)
    with mlflow.start_run() as run:
        log_dataset_input(REPORT)
    assert len(calls) == 2
    assert _datasets(run.info.run_id) == _datasets(other.info.run_id) == [("mnist", "0123abcd")]


def test_any_other_store_error_is_raised_at_once(
    tracking: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def refuses(*args, **kwargs) -> None:
        calls.append(1)
        raise MlflowException("RESOURCE_DOES_NOT_EXIST: run not found")

    monkeypatch.setattr(dataset_input.mlflow, "log_input", refuses)
    with mlflow.start_run(), pytest.raises(MlflowException, match="RESOURCE_DOES_NOT_EXIST"):
        log_dataset_input(REPORT)
    assert len(calls) == 1
