"""The data a training run used, as an MLflow dataset input (the UI's Datasets column)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from typing import Any

import mlflow
import numpy as np
from mlflow.data.code_dataset_source import CodeDatasetSource
from mlflow.data.dataset_source import DatasetSource
from mlflow.data.meta_dataset import MetaDataset
from mlflow.exceptions import MlflowException
from mlflow.types import Schema, TensorSpec

#: MLflow's store looks for the experiment's dataset row, then inserts it when missing: runs of
#: one experiment that log the same data at once (a study's workers on one server) can both
#: insert, and the later one fails on the unique key. Asked again, it finds the row.
LOG_ATTEMPTS = 4
_LOST_INSERT_RACE = ("UniqueViolation", "duplicate key", "UNIQUE constraint failed",
                     "IntegrityError")


def log_dataset_input(report: Mapping[str, Any]) -> None:
    """Log a worker's ``dataset`` report (:meth:`Dataset.input_report`) to the active run,
    in context ``training``."""
    shape = tuple(int(d) for d in str(report["input_shape"]).split("x"))
    schema = Schema([TensorSpec(np.dtype(np.float32), (-1, *shape), "image"),
                     TensorSpec(np.dtype(np.int64), (-1,), "label")])
    dataset = MetaDataset(_source(report), name=str(report["name"]),
                          digest=str(report["digest"]), schema=schema)
    tags = {key: str(report[key]) for key in ("train_samples", "test_samples", "num_classes")}
    for attempt in range(1, LOG_ATTEMPTS + 1):
        try:
            mlflow.log_input(dataset, context="training", tags=tags)
            return
        except MlflowException as e:
            if attempt == LOG_ATTEMPTS or not lost_an_insert_race(e):
                raise
            time.sleep(0.1 * attempt)


def lost_an_insert_race(error: MlflowException) -> bool:
    """Whether the store refused a row another client inserted first."""
    return any(marker in str(error) for marker in _LOST_INSERT_RACE)


def _source(report: Mapping[str, Any]) -> DatasetSource:
    """The folder the data came from, or the built-in registry for embedded data."""
    if report.get("data_dir"):
        from mlflow.data.dataset_source_registry import resolve_dataset_source

        with warnings.catch_warnings():  # "can be interpreted in multiple ways": all local
            warnings.simplefilter("ignore")
            return resolve_dataset_source(str(report["data_dir"]))
    return CodeDatasetSource({"mlflow_dlaas.dataset": str(report["name"])})
