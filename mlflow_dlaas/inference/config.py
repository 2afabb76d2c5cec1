"""The inference run's configuration, validated before anything loads."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from mlflow_dlaas.backends import InferenceOptions, get_runtime
from mlflow_dlaas.config import (
    NESTED,
    as_int,
    config_from_params,
    nested_params,
    refuse_emulated_bf16,
)
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.instance_layout import check_layout
from mlflow_dlaas.inference.model_uri import ModelUri, parse_model_uri
from mlflow_dlaas.inference.text_model import (
    TEXT_MODELS,
    TEXT_RUNTIMES,
    check_sequence_length,
)
from mlflow_dlaas.models import MODELS
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.precision import Precision
from mlflow_dlaas.runs.validity import ValidityThresholds

SCENARIOS = ("single_stream", "multi_stream", "offline", "server", "ensemble")
PRECISIONS = tuple(Precision)
#: How int8 is made: weights ahead, activations at run time (dynamic), or both ahead,
#: calibrated on the reference inputs (static, QDQ)
QUANTIZATIONS = ("dynamic", "static")
ENSEMBLE_MODES = ("threads", "processes")
#: Served fresh (no model_uri): an architecture of the registry, or a text model.
FRESH_MODELS = (*sorted(MODELS), *TEXT_MODELS)


@dataclass(frozen=True)
class InferConfig:
    runtime: str
    model: str = "lenet5"
    #: overrides model: runs:/<id> of a training run, or the user's own model (a path,
    #: file://, runs:/<id>/<path>, models:/<name>/<version>, mlflow-artifacts:/...); given
    #: as text, held parsed (None: a fresh model)
    model_uri: ModelUri | None = None
    input_shape: str = ""  # per sample, e.g. 3x32x32 (name:shape,... for several inputs)
    input_dtype: str = ""  # the user's model: float32, int64, ... (name:dtype,...)
    input_data: str = ""  # the user's model: an .npz of real samples, one array per input
    sequence_length: int = 128  # tokens per sample of a text model (bert_base)
    batch_sizes: tuple[int, ...] = (1, 8, 32)
    scenarios: tuple[str, ...] = ("single_stream", "offline", "server")
    min_query_count: int = 100
    min_duration_s: float = 1.0
    warmup_queries: int = 10
    server_target_qps: float = 0.0  # 0: half the single-stream capacity at batch 1
    server_p99_bound_ms: float = 0.0  # > 0: also search the highest rate under this p99
    server_max_batch: int = 1  # > 1: dynamic batching of queued queries, up to this many
    server_max_wait_ms: float = 0.0  # how long the oldest query may wait for a batch to fill
    multi_stream_samples: int = 8  # samples per multi-stream query
    ensemble_size: int = 2
    ensemble_mode: str = "threads"
    #: > 1: every scenario served by this many pinned copies (inference.instances)
    instances: int = 1
    cores_per_instance: int = 0  # 0: the usable cores split evenly between the instances
    precision: Precision = Precision.FP32  # bf16: a CPU with native bf16, or a GPU; fp16: a GPU
    quantization: str = "dynamic"  # int8: dynamic | static (QDQ, calibrated)
    device: str = "cpu"
    graph_optimization_level: str = "all"
    execution_mode: str = "sequential"
    torch_compile: bool = False
    jit_compile: bool = False
    rtol: float = 1e-3  # output equivalence, fp32; int8 and fp16 are checked on top-1
    atol: float = 1e-4
    seed: int = 0
    monitor_interval: float = 0.2
    stall_timeout_s: float = 3600.0
    parallelism: ParallelismSettings = field(default_factory=ParallelismSettings)
    validity: ValidityThresholds = field(default_factory=ValidityThresholds)

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", Precision.parse(self.precision))
        if isinstance(self.model_uri, str):  # the one place a model_uri's text is read
            parsed = parse_model_uri(self.model_uri) if self.model_uri.strip() else None
            object.__setattr__(self, "model_uri", parsed)
        if not self.model_uri and self.model not in FRESH_MODELS:
            raise ConfigError(f"unknown model {self.model!r}; choose one of: "
                              f"{', '.join(FRESH_MODELS)}, or give model_uri=runs:/<run id>")
        if not self.model_uri and self.model in TEXT_MODELS:
            self._check_text_model()
        if not self.batch_sizes or min(self.batch_sizes) <= 0:
            raise ConfigError(f"batch_sizes must be positive, got {self.batch_sizes}; e.g. 1,8,32")
        bad = [s for s in self.scenarios if s not in SCENARIOS]
        if bad or not self.scenarios:
            raise ConfigError(f"scenarios: {bad or 'none'} not in {', '.join(SCENARIOS)}")
        for name, valid in (("ensemble_mode", ENSEMBLE_MODES),
                            ("device", ("cpu", "cuda")), ("quantization", QUANTIZATIONS)):
            if getattr(self, name) not in valid:
                raise ConfigError(f"{name} must be one of {', '.join(valid)}, "
                                  f"got {getattr(self, name)!r}")
        if self.min_query_count < 1 or self.min_duration_s < 0 or self.warmup_queries < 0:
            raise ConfigError("min_query_count must be >= 1, min_duration_s and "
                              "warmup_queries >= 0")
        if self.ensemble_size < 1:
            raise ConfigError("ensemble_size must be >= 1")
        check_layout(self.instances, self.cores_per_instance, self.scenarios,
                     self.parallelism)
        if self.server_max_batch < 1 or self.server_max_wait_ms < 0:
            raise ConfigError("server_max_batch must be >= 1 and server_max_wait_ms >= 0")
        if self.multi_stream_samples < 1:
            raise ConfigError("multi_stream_samples must be >= 1")
        if (self.input_dtype or self.input_data) and not self.model_uri:
            raise ConfigError("input_dtype and input_data apply to your own model: give "
                              "model_uri too")
        if not (self.stall_timeout_s > 0 and math.isfinite(self.stall_timeout_s)):
            raise ConfigError(f"stall_timeout_s must be a finite number > 0, "
                              f"got {self.stall_timeout_s}")
        # the runtime's own refusal first: another CPU would not lift it, as it lifts the next
        get_runtime(self.runtime).refuse_unserved(self.options(), user_file=self.user_file)
        refuse_emulated_bf16(self.precision, self.device)  # valid, but not measurable here

    @property
    def user_file(self) -> bool:
        """Whether the model served is the user's own file (not a run's model)."""
        return self.model_uri is not None and self.model_uri.kind != "run"

    def options(self) -> InferenceOptions:
        """What the runtime is asked to serve the model at."""
        return InferenceOptions(self.precision, self.quantization, self.device,
                                self.graph_optimization_level, self.execution_mode,
                                self.torch_compile, self.jit_compile, self.parallelism)

    def _check_text_model(self) -> None:
        if self.runtime not in TEXT_RUNTIMES:
            raise ConfigError(f"{self.model} is served on {', '.join(TEXT_RUNTIMES)}, not "
                              f"{self.runtime}: TensorFlow's BERT needs tf-keras, which this "
                              "project does not install, and MXNet has none")
        if self.input_shape:
            raise ConfigError(f"{self.model}'s input is token ids and an attention mask: set "
                              "-P sequence_length, not input_shape")
        check_sequence_length(self.sequence_length)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> InferConfig:
        """From raw entry-point params; runs of a served file are named by its model."""
        config = config_from_params(cls, params, "inference", {
            "batch_sizes": lambda v: tuple(as_int("batch_sizes", b) for b in str(v).split(",")),
            "scenarios": lambda v: tuple(s.strip() for s in str(v).split(",") if s.strip())})
        typed = {k for k, v in params.items() if v is not None and v != ""}
        if config.model_uri is not None and "model" not in typed:  # runs named by the model
            config = replace(config, model=config.model_uri.label)
        return config

    def as_params(self) -> dict[str, Any]:
        params = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in NESTED}
        params["batch_sizes"] = ",".join(map(str, self.batch_sizes))
        params["scenarios"] = ",".join(self.scenarios)
        params["model_uri"] = self.model_uri.text if self.model_uri is not None else ""
        if self.model not in TEXT_MODELS:  # an image model's run does not carry it
            del params["sequence_length"]
        return {**params, **nested_params(self.parallelism, self.validity)}
