"""The data a training run used, as an MLflow dataset input (the UI's Datasets column)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import mlflow
import numpy as np
from mlflow.data.code_dataset_source import CodeDatasetSource
from mlflow.data.dataset_source import DatasetSource
from mlflow.data.meta_dataset import MetaDataset
from mlflow.types import Schema, TensorSpec


def log_dataset_input(report: Mapping[str, Any]) -> None:
    """Log a worker's ``dataset`` report (:meth:`Dataset.input_report`) to the active run,
    in context ``training``."""
    shape = tuple(int(d) for d in str(report["input_shape"]).split("x"))
    schema = Schema([TensorSpec(np.dtype(np.float32), (-1, *shape), "image"),
                     TensorSpec(np.dtype(np.int64), (-1,), "label")])
    dataset = MetaDataset(_source(report), name=str(report["name"]),
                          digest=str(report["digest"]), schema=schema)
    mlflow.log_input(dataset, context="training", tags={
        "train_samples": str(report["train_samples"]),
        "test_samples": str(report["test_samples"]),
        "num_classes": str(report["num_classes"])})


def _source(report: Mapping[str, Any]) -> DatasetSource:
    """The folder the data came from, or the built-in registry for embedded data."""
    if report.get("data_dir"):
        from mlflow.data.dataset_source_registry import resolve_dataset_source

        with warnings.catch_warnings():  # "can be interpreted in multiple ways": all local
            warnings.simplefilter("ignore")
            return resolve_dataset_source(str(report["data_dir"]))
    return CodeDatasetSource({"mlflow_dlaas.dataset": str(report["name"])})
