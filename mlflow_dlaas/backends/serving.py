"""The inference-runtime ABC: prepare a model source, return a synchronous predictor."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.models.spec import ArchitectureSpec
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.precision import Precision


@dataclass(frozen=True)
class InferenceOptions:
    """Runtime settings; each runtime refuses the ones it cannot honour."""

    precision: Precision = Precision.FP32
    quantization: str = "dynamic"  # int8: dynamic | static (QDQ, calibrated)
    device: str = "cpu"
    graph_optimization_level: str = "all"  # ONNX Runtime: disable | basic | extended | all
    execution_mode: str = "sequential"  # ONNX Runtime: sequential | parallel
    torch_compile: bool = False
    jit_compile: bool = False  # TensorFlow XLA
    parallelism: ParallelismSettings = ParallelismSettings()

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", Precision.parse(self.precision))


class InferenceRuntime(abc.ABC):
    name: ClassVar[str]
    module: ClassVar[str]
    extra: ClassVar[str]
    #: 'onnx' when the runtime executes the ONNX export, else the framework it loads natively.
    consumes: ClassVar[str]
    #: The runtime's native library (a file-name prefix such as ``libtorch_cpu``): the
    #: library read-back resolves OpenMP entry points as it binds them.
    native_library: ClassVar[str] = ""
    #: The MLflow Projects environment manager its project runs in ("virtualenv" where it
    #: needs an environment of its own), and the modules a run of it imports here (none
    #: where it runs in its own environment).
    env_manager: ClassVar[str] = "local"
    modules: ClassVar[tuple[str, ...]] = ()
    #: The precisions it serves, each with the devices it serves it on: asked (through
    #: :meth:`refuse_unserved`) before any run starts, never found out in :meth:`prepare`.
    precisions: ClassVar[Mapping[Precision, tuple[str, ...]]] = {Precision.FP32: ("cpu",)}
    #: What to use instead, for a precision it does not serve (or not on the device asked).
    instead: ClassVar[Mapping[Precision, str]] = {}
    #: How it takes int8: dynamic (quantized as it runs) and / or static (QDQ, calibrated).
    int8_quantizations: ClassVar[tuple[str, ...]] = ()
    #: The precisions it serves a user's own model file at (as saved, by default).
    user_file_precisions: ClassVar[tuple[Precision, ...] | None] = None

    def refuse_unserved(self, options: InferenceOptions, *, user_file: bool = False) -> None:
        """ConfigError, saying what to use instead, where this runtime does not serve
        ``options``' precision on its device (or, for ``user_file``, at that precision)."""
        precision, devices = options.precision, self.precisions.get(options.precision, ())
        if options.device not in devices:
            raise ConfigError(self.instead.get(precision) or (
                f"the {self.name} runtime serves {precision} on {' or '.join(devices)} "
                f"here, not {options.device}" if devices else
                f"the {self.name} runtime does not serve {precision} (it serves "
                f"{', '.join(self.precisions)})"))
        if precision is Precision.INT8 and options.quantization not in self.int8_quantizations:
            raise ConfigError(f"the {self.name} runtime takes int8 "
                              f"{' or '.join(self.int8_quantizations)} quantized, not "
                              f"{options.quantization}: add -P quantization="
                              f"{self.int8_quantizations[0]}")
        allowed = self.user_file_precisions
        if user_file and allowed is not None and precision not in allowed:
            raise ConfigError(f"the {self.name} runtime serves your own model file at "
                              f"{', '.join(allowed)} (as saved); {precision} on your file goes "
                              "through another runtime")

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
