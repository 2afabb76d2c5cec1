"""Which road a served model takes, decided once by the entry (:func:`plan_source`): a fresh
architecture (:class:`Fresh`), a training run's model (:class:`TrainingRun`, looked up in the
tracking store once), the user's own file or MLflow model (:class:`UserFile`), or a text
model built here (:class:`TextModel`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mlflow_dlaas.backends import InferenceRuntime
from mlflow_dlaas.backends.formats import serves_onnx
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.model_uri import ModelUri
from mlflow_dlaas.inference.sources.fetch import TrainingRunFound, find_training_run
from mlflow_dlaas.inference.text_model import TEXT_MODELS


@dataclass(frozen=True)
class Fresh:
    """An architecture of the registry with random weights: built by the measured worker's
    runtime itself, or (``exported``) built and exported to ONNX beforehand."""

    kind: ClassVar[str] = "fresh"  # the run's MODEL_SOURCE_TAG

    name: str
    exported: bool


@dataclass(frozen=True)
class TrainingRun:
    """A training run's model: its ONNX export, and its saved model ``with_model``."""

    kind: ClassVar[str] = "training_run"  # the run's MODEL_SOURCE_TAG

    name: str
    run: TrainingRunFound
    with_model: bool


@dataclass(frozen=True)
class UserFile:
    """The user's own model file or MLflow model."""

    kind: ClassVar[str] = "user_model"  # the run's MODEL_SOURCE_TAG

    name: str
    uri: ModelUri


@dataclass(frozen=True)
class TextModel:
    """A text model built with random weights (``bert_base``), served as a user's file."""

    kind: ClassVar[str] = "text_model"  # the run's MODEL_SOURCE_TAG

    name: str


SourcePlan = Fresh | TrainingRun | UserFile | TextModel


def plan_source(config: InferConfig, runtime: InferenceRuntime) -> SourcePlan:
    """The road of ``config``'s model to ``runtime``; a ``runs:/`` URI's run is looked up
    here, once. ``name`` is the model's name for the run's name: a training run's own
    ``model`` param where the URI is that run (``mlp`` rather than ``run-1a2b3c4d``)."""
    uri = config.model_uri
    if uri is None:
        if config.model in TEXT_MODELS:
            return TextModel(config.model)
        return Fresh(config.model, exported=serves_onnx(runtime))
    if uri.kind == "run":
        found = find_training_run(uri)
        if found is not None:
            name = found.model if config.model == uri.label else config.model
            return TrainingRun(name, found, with_model=not serves_onnx(runtime))
    return UserFile(config.model, uri)
