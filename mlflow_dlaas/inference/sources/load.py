"""The measured worker's side of a model's road: the :class:`ModelSource` its runtime
prepares, read from the folder the entry prepared (``DLAAS_RUN_SOURCE_DIR``), or a fresh
model built here by the runtime itself. Imports no MLflow."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from mlflow_dlaas.backends import InferenceRuntime
from mlflow_dlaas.backends.feed import Feed
from mlflow_dlaas.backends.served_model import ModelSource
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.sources.fresh import fresh_inputs, fresh_source
from mlflow_dlaas.inference.sources.manifest import (
    MODEL_DIR,
    ONNX_DIR,
    SOURCE_ENV,
    SourceManifest,
    read_reference,
)
from mlflow_dlaas.models import get_model


def load_source(config: InferConfig, runtime: InferenceRuntime) -> ModelSource:
    """The model to serve (``runtime`` loaded): what the entry prepared, else a fresh one."""
    if os.environ.get(SOURCE_ENV):
        return prepared_source(Path(os.environ[SOURCE_ENV]))
    return fresh_source(runtime, config.model, config.input_shape, config.seed)


def prepared_source(directory: Path) -> ModelSource:
    """The model of a folder the entry prepared (:mod:`.prepare`)."""
    manifest = SourceManifest.read(directory)
    reference = read_reference(directory)
    if manifest.user is not None:
        assert reference is not None and isinstance(reference[0], Feed)
        inputs, outputs = reference
        return ModelSource(manifest.model, manifest.user.inputs[0].shape, 0,  # type: ignore[arg-type]
                           inputs, outputs, manifest.framework,  # type: ignore[arg-type]
                           onnx_path=manifest.user.onnx_path, user=manifest.user,
                           forward_flops=manifest.forward_flops,
                           parameter_count=manifest.parameter_count)
    shape = manifest.input_shape
    inputs, outputs = reference or (fresh_inputs(shape, 0), np.empty((0,)))
    onnx_path, model_dir = directory / ONNX_DIR / "model.onnx", directory / MODEL_DIR
    return ModelSource(manifest.model, shape, manifest.num_classes, inputs,  # type: ignore[arg-type]
                       outputs, manifest.framework, get_model(manifest.model),
                       run_id=manifest.run_id,
                       trained_with=manifest.framework if manifest.run_id else None,
                       onnx_path=onnx_path if onnx_path.is_file() else None,
                       model_dir=model_dir if model_dir.is_dir() else None)
