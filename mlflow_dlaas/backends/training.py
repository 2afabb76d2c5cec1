"""The adapter ABC every framework implements, and the values it returns."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.models.spec import ArchitectureSpec
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.precision import Precision


def pinned_requirement(*distributions: str) -> str:
    """``name==version`` of the first of ``distributions`` installed here."""
    for name in distributions:
        try:
            return f"{name}=={metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    raise ValueError(f"none of {distributions} is installed")


@dataclass(frozen=True)
class StepStats:
    """Totals over a run of training steps."""

    loss_sum: float  # sum over samples of the per-sample loss
    correct: int
    samples: int
    steps: int

    @property
    def mean_loss(self) -> float:
        return self.loss_sum / max(self.samples, 1)

    @property
    def accuracy(self) -> float:
        return self.correct / max(self.samples, 1)


@dataclass(frozen=True)
class BuildOptions:
    """How to build and train a model: optimizer semantics and framework speed settings."""

    optimizer: str
    learning_rate: float
    momentum: float
    weight_decay: float
    seed: int
    device: str
    jit_compile: bool = False  # TensorFlow XLA
    channels_last: bool = False  # PyTorch memory format
    hybridize: bool = True  # MXNet static graph
    precision: str = "fp32"  # fp32 | bf16 (mixed precision, where the adapter has it)


class Trainer(abc.ABC):
    """One model and its optimizer in one framework."""

    @abc.abstractmethod
    def parameter_count(self) -> int:
        """Trainable parameters."""

    @abc.abstractmethod
    def train_steps(self, x: np.ndarray, y: np.ndarray, batch_size: int,
                    max_steps: int | None = None) -> StepStats:
        """Train on consecutive batches of (x, y) (already shuffled), at most ``max_steps``.

        Returns once the device has finished the work, so a clock read after it is true.
        """

    def precision_in_force(self) -> str:
        """The compute precision as the framework reports it (``fp32``, ``mixed_bfloat16``)."""
        return "fp32"

    @abc.abstractmethod
    def predict(self, x: np.ndarray, batch_size: int) -> np.ndarray:
        """Logits (N, num_classes) as a numpy array, in inference mode."""

    @abc.abstractmethod
    def save_model(self, directory: Path, example: np.ndarray) -> str:
        """Write the trained model into the empty ``directory``; returns its format.

        Where MLflow has a flavor, an MLflow model folder with the requirements we know
        (MLflow's own inference of them would start a subprocess that loads the model).
        """

    @abc.abstractmethod
    def export_onnx(self, path: Path, example: np.ndarray) -> None:
        """Write the model as ONNX to ``path``; raise NotImplementedError with the reason."""


class FrameworkAdapter(abc.ABC):
    """A deep-learning framework: how to configure it, and how to build trainers in it."""

    name: ClassVar[str]
    module: ClassVar[str]  # the import name
    extra: ClassVar[str]  # the pip extra (or environment) that installs it
    #: The training precisions it has (:data:`mlflow_dlaas.config.TRAIN_PRECISIONS`).
    precisions: ClassVar[tuple[Precision, ...]] = (Precision.FP32,)
    #: The MLflow Projects environment manager its project runs in ("virtualenv" where it
    #: needs an environment of its own), and the modules a run of it imports here (none
    #: where it runs in its own environment).
    env_manager: ClassVar[str] = "local"
    modules: ClassVar[tuple[str, ...]] = ()

    def refuse_unserved(self, precision: Precision) -> None:
        """ConfigError, before anything starts, where it does not train in ``precision``."""
        if precision not in self.precisions:
            raise ConfigError(f"precision {precision}: {self.name} trains in "
                              f"{', '.join(self.precisions)} here; bf16 training is measured "
                              "on pytorch (autocast) and tensorflow (mixed_bfloat16)")
    #: The framework's native library (a file-name prefix such as ``libtorch_cpu``): the
    #: library read-back resolves OpenMP entry points as it binds them.
    native_library: ClassVar[str] = ""

    def environment(self, settings: ParallelismSettings) -> dict[str, str]:
        """Variables the framework reads at import (set before :meth:`load`); ConfigError for
        a library setting it cannot honour."""
        return {}

    def libraries_in_force(self) -> dict[str, Any]:
        """The framework's own report of its parallel libraries, after :meth:`load`:
        ``onednn`` ('on' / 'off') where it has a oneDNN switch, and its build reports."""
        return {}

    @abc.abstractmethod
    def load(self) -> None:
        """Import the framework; raise MissingDependencyError naming the extra."""

    @abc.abstractmethod
    def version(self) -> str:
        """The framework's version."""

    @abc.abstractmethod
    def configure_threads(self, settings: ParallelismSettings) -> None:
        """Apply the thread (and oneDNN) settings through the framework's own calls."""

    @abc.abstractmethod
    def threads_in_force(self) -> dict[str, Any]:
        """Thread settings as the framework reports them now (read back, not echoed)."""

    @abc.abstractmethod
    def device_available(self, device: str) -> bool:
        """Whether ``device`` ('cpu', 'cuda') can run this framework here."""

    @abc.abstractmethod
    def build(self, spec: ArchitectureSpec, input_shape: tuple[int, int, int],
              num_classes: int, options: BuildOptions) -> Trainer:
        """A fresh model from ``spec`` (Glorot-uniform weights, zero biases) and its optimizer."""
