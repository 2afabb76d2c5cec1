"""What a serving runtime receives: the model to serve (:class:`ModelSource`, with the user's
own model's :class:`UserModel` and its :class:`InputSpec` inputs) and what it returns, a
:data:`Predictor`. Defined here, below the runtimes, so that each backend depends on these
types and nothing of the inference harness above it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.models.spec import ArchitectureSpec

#: Takes a batch (an array, or a Feed of several inputs) and returns the first output.
Predictor = Callable[[Any], np.ndarray]


@dataclass(frozen=True)
class InputSpec:
    """One model input: per-sample shape (no batch dimension), numpy dtype name, and the
    batch size the model fixes (None when the batch dimension is dynamic)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    fixed_batch: int | None = None


@dataclass(frozen=True)
class UserModel:
    """What the entry's preparation found out, read back by the measured worker."""

    kind: str
    path: Path  # the model as the user gave it (file or SavedModel directory)
    onnx_path: Path | None  # the ONNX file for the ONNX runtimes (given, or exported)
    inputs: tuple[InputSpec, ...]
    input_data: Path | None = None

    def describe_inputs(self) -> str:
        """``x:float32[3x224x224],mask:int64[128]`` (per sample)."""
        return ",".join(f"{s.name}:{s.dtype}[{'x'.join(map(str, s.shape))}]"
                        for s in self.inputs)

    @property
    def fixed_batch(self) -> int | None:
        return next((s.fixed_batch for s in self.inputs if s.fixed_batch), None)


@dataclass(frozen=True)
class ModelSource:
    """A model to serve, and the reference its runtime must reproduce."""

    name: str
    input_shape: tuple[int, int, int]
    num_classes: int
    reference_inputs: np.ndarray
    reference_outputs: np.ndarray
    reference_framework: str
    spec: ArchitectureSpec | None = None  # None for the user's own model
    run_id: str | None = None
    trained_with: str | None = None  # the training run's framework
    onnx_path: Path | None = None
    torch_module: Any = None  # the PyTorch module when this process built or loaded it
    model_dir: Path | None = None  # the training run's saved model, downloaded
    #: the user's own model (inputs: a Feed of named arrays, in the model's own layout)
    user: UserModel | None = None
    #: forward FLOPs per sample where no spec counts them (a text model's, counted where
    #: it was built)
    forward_flops: int | None = None
    parameter_count: int | None = None  # likewise, where no spec counts them

    def flops_per_sample(self) -> int | None:
        """Forward FLOPs of one sample: the spec's count, else the one the source brought."""
        if self.spec is not None:
            return self.spec.forward_flops(self.input_shape, self.num_classes)
        return self.forward_flops

    def onnx_file(self, runtime: str) -> Path:
        """The ONNX file an ONNX-serving ``runtime`` loads; ConfigError saying why there is
        none."""
        if self.onnx_path is None or not self.onnx_path.is_file():
            if self.user is not None:
                raise ConfigError(f"the {runtime} runtime serves ONNX, and {self.name} has no "
                                  "ONNX file")
            raise ConfigError(f"the {runtime} runtime serves an ONNX export, and run "
                              f"{self.run_id} has none (its tag dlaas.onnx says why)")
        return self.onnx_path
