"""What the measured inference worker serves with: the runtime's options, the inputs of the
scenarios, and where LoadGen writes its logs (shared by the worker and its instance
processes)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends import InferenceRuntime
from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.sources.fresh import fresh_inputs
from mlflow_dlaas.inference.sources.inputs import in_batches, inputs_for
from mlflow_dlaas.measured_process.channel import worker_dir

OFFLINE_POOL = 4  # offline queries cycle through this many distinct batches
LOADGEN_DIR_ENV = "DLAAS_LOADGEN_DIR"


def prepared(runtime: InferenceRuntime, source: ModelSource, config: InferConfig
             ) -> Predictor:
    """The run's thread settings applied (process-wide where the library takes them so),
    then the model prepared: the one step every process that serves takes."""
    options = config.options()
    runtime.refuse_unserved(options, user_file=source.user is not None)
    runtime.apply_threads(config.parallelism)
    return runtime.prepare(source, options)


def loadgen_root() -> Path:
    """The run's folder of LoadGen logs (its ``loadgen/`` artifacts), named in the
    environment so that instance processes started afterwards write there too."""
    if not os.environ.get(LOADGEN_DIR_ENV):
        os.environ[LOADGEN_DIR_ENV] = str(worker_dir())
    return Path(os.environ[LOADGEN_DIR_ENV])


def loadgen_dir(scenario: str, size: int) -> Path:
    """Where LoadGen writes the logs of one test."""
    return loadgen_root() / f"{scenario}_batch_{size}"


def inputs_of(runtime: InferenceRuntime, source: ModelSource, config: InferConfig) -> Any:
    """The scenarios' inputs: enough distinct samples for every batch size and query."""
    return sample_inputs(runtime, source, config.seed + 1, OFFLINE_POOL * max(
        *config.batch_sizes, config.server_max_batch, config.multi_stream_samples))


def sample_inputs(runtime: InferenceRuntime, source: ModelSource, seed: int, n: int) -> Any:
    """``n`` samples in the runtime's layout (the user's model: its own inputs, as a Feed)."""
    if source.user is not None:
        return inputs_for(source.user, n, seed)
    return runtime.layout(fresh_inputs(source.input_shape, seed, n))


def in_fixed_batches(predict: Predictor, fixed: int) -> Predictor:
    """A predictor that takes any multiple of ``fixed`` samples (multi-stream queries)."""

    def predict_any(x: Any) -> np.ndarray:
        return predict(x) if len(x) == fixed else in_batches(predict, x, fixed)

    return predict_any
