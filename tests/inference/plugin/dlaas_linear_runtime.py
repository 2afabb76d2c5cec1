"""A runtime with its own file kind, for tests only: a linear model kept as an ``.linear``
file (an ``.npz`` of weights ``w`` and bias ``b``), served by numpy.

What a third party ships as its own package; it reaches mlflow-dlaas through two lines in
its package metadata, one per entry-point group::

    [mlflow_dlaas.runtimes]
    linear = dlaas_linear_runtime:LinearRuntime
    [mlflow_dlaas.model_formats]
    linear = dlaas_linear_runtime:FORMATS
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends.feed import Feed
from mlflow_dlaas.backends.model_files import ModelFormat, OpenedModel, resolve_inputs
from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.backends.serving import InferenceOptions, InferenceRuntime
from mlflow_dlaas.errors import ConfigError

KIND = "linear"


def read_linear(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with np.load(path) as saved:
        return saved["w"].astype(np.float32), saved["b"].astype(np.float32)


def open_linear(path: Path, shapes: dict, dtypes: dict) -> OpenedModel:
    try:
        w, b = read_linear(path)
    except (OSError, KeyError, ValueError) as e:
        raise ConfigError(f"cannot read {path.name} as a linear model: {e}") from None
    inputs = resolve_inputs([("x", [None, w.shape[0]], "float32")], shapes, dtypes,
                            origin=f"linear model {path.name}")
    return OpenedModel(inputs, lambda feed: feed["x"].astype(np.float64) @ w + b)


FORMATS = (ModelFormat(KIND, KIND, "a linear model (.linear)",
                       recognises=lambda path: path.is_file() and path.suffix == ".linear",
                       open=open_linear),)


class LinearRuntime(InferenceRuntime):
    name = "linear"
    module = "numpy"
    extra = "linear"
    consumes = KIND

    def load(self) -> None:
        self.version_text = np.__version__

    def version(self) -> str:
        return f"numpy {self.version_text}"

    def threads_in_force(self) -> dict[str, Any]:
        return {"intra_op_threads": 1}

    def prepare(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        if source.user is None:
            raise ConfigError("the linear runtime serves .linear files only: give model_uri")
        w, b = read_linear(source.user.path)

        def predict(feed: Feed) -> np.ndarray:
            return feed["x"] @ w + b

        return predict
