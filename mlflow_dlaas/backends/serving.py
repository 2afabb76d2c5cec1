"""The inference-runtime ABC: prepare a model source, return a synchronous predictor."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.models.spec import ArchitectureSpec
from mlflow_dlaas.parallelism import ParallelismSettings


@dataclass(frozen=True)
class InferenceOptions:
    """Runtime settings; each runtime refuses the ones it cannot honour."""

    precision: str = "fp32"  # fp32 | bf16 | fp16 (GPU) | int8
    quantization: str = "dynamic"  # int8: dynamic | static (QDQ, calibrated)
    device: str = "cpu"
    graph_optimization_level: str = "all"  # ONNX Runtime: disable | basic | extended | all
    execution_mode: str = "sequential"  # ONNX Runtime: sequential | parallel
    torch_compile: bool = False
    jit_compile: bool = False  # TensorFlow XLA
    parallelism: ParallelismSettings = ParallelismSettings()


class InferenceRuntime(abc.ABC):
    name: ClassVar[str]
    module: ClassVar[str]
    extra: ClassVar[str]
    #: 'onnx' when the runtime executes the ONNX export, else the framework it loads natively.
    consumes: ClassVar[str]
    #: The runtime's native library (a file-name prefix such as ``libtorch_cpu``): the
    #: library read-back resolves OpenMP entry points as it binds them.
    native_library: ClassVar[str] = ""

    def environment(self, settings: ParallelismSettings) -> dict[str, str]:
        """Variables read at import (set before :meth:`load`); ConfigError for a library
        setting the runtime cannot honour."""
        return {}

    def build_details(self, imported: Any) -> dict[str, Any]:
        """What a run's fingerprint records of the build of :attr:`module`, imported (BLAS,
        oneDNN, OpenMP, CUDA)."""
        return {}

    def libraries_in_force(self) -> dict[str, Any]:
        """The runtime's own report of its parallel libraries, after :meth:`prepare`:
        ``onednn`` ('on' / 'off') as it will be used, and its build reports."""
        return {}

    def apply_threads(self, settings: ParallelismSettings) -> None:
        """Set the thread counts a library takes process-wide; the harness calls it after
        :meth:`load` and before :meth:`prepare`. Runtimes whose sessions take threads as
        options (ONNX Runtime, OpenVINO) read ``options.parallelism`` in :meth:`prepare`."""
        return None

    @abc.abstractmethod
    def load(self) -> None:
        """Import the runtime; MissingDependencyError names the extra."""

    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def threads_in_force(self) -> dict[str, Any]:
        """Thread settings the runtime reports, after :meth:`prepare`."""

    @abc.abstractmethod
    def prepare(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        """Load / compile the model; the predictor returns numpy logits, device work done.

        For a source without reference outputs (built natively by this runtime), prepare
        returns them through :meth:`reference` computed in the framework's plain mode.
        """

    def fresh_source(self, spec: ArchitectureSpec, shape: tuple[int, int, int], classes: int,
                     inputs: np.ndarray, seed: int) -> ModelSource:
        """A fresh model of ``spec`` (random weights) as this runtime takes it; by default
        the spec alone, which :meth:`prepare` builds in the runtime's own framework (its
        outputs then come from :meth:`reference`)."""
        return ModelSource(spec.name, shape, classes, inputs, np.empty((0,)), self.name, spec)

    def export_onnx(self, source: ModelSource, path: Path) -> None:
        """Write the model of :meth:`fresh_source` as an ONNX file (runtimes that build
        the fresh models the ONNX runtimes serve)."""
        raise ConfigError(f"the {self.name} runtime does not export models to ONNX")

    def reference(self) -> np.ndarray | None:
        """Reference outputs this runtime computed itself (natively built sources only)."""
        return None

    def layout(self, x: np.ndarray) -> np.ndarray:
        """Inputs in the runtime's layout, converted once outside any timing (NCHW here)."""
        return x
