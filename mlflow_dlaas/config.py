"""Typed, validated, frozen run configurations built from entry-point params."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, TypeVar

from mlflow_dlaas.data import DEFAULT_DATASET, LOADERS
from mlflow_dlaas.errors import ConfigError, NotMeasurableHereError
from mlflow_dlaas.hardware import emulated_bf16_reason
from mlflow_dlaas.models import MODELS
from mlflow_dlaas.parallelism import STRING_SETTINGS, ParallelismSettings
from mlflow_dlaas.precision import Precision
from mlflow_dlaas.presets import get_preset
from mlflow_dlaas.runs.validity import ValidityThresholds

OPTIMIZERS = ("sgd", "adam")
DEVICES = ("cpu", "cuda")
#: Training precisions: fp32, or bf16 mixed precision (bf16 compute, fp32 weights) on a CPU
#: with native bf16 or a GPU.
TRAIN_PRECISIONS = (Precision.FP32, Precision.BF16)


def refuse_emulated_bf16(precision: Precision, device: str) -> None:
    """NotMeasurableHereError where bf16 on the CPU would be emulated: a valid setting,
    refused for one run and skipped by a study on this machine."""
    reason = emulated_bf16_reason() if precision == Precision.BF16 and device == "cpu" else ""
    if reason:
        raise NotMeasurableHereError(f"precision bf16: {reason}")


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Built by :meth:`from_params`: explicit value > preset > default."""

    framework: str
    dataset: str = DEFAULT_DATASET
    data_dir: str = ""
    model: str = "lenet5"
    epochs: int = 3
    max_steps: int = 0
    batch_size: int = 64
    learning_rate: float = 0.01
    momentum: float = 0.9
    optimizer: str = "sgd"
    weight_decay: float = 0.0
    seed: int = 0
    target_accuracy: float = 0.95
    warmup_steps: int = 5  # at most; the warm-up ends earlier once step times settle
    warmup_budget_s: float = 30.0  # and once it has taken this long
    device: str = "cpu"
    jit_compile: bool = False
    channels_last: bool = False
    hybridize: bool = True
    precision: Precision = Precision.FP32  # fp32 | bf16 (mixed: bf16 compute, fp32 weights)
    preset: str = ""
    monitor_interval: float = 0.2
    log_model: bool = True
    stall_timeout_s: float = 3600.0
    parallelism: ParallelismSettings = field(default_factory=ParallelismSettings)
    validity: ValidityThresholds = field(default_factory=ValidityThresholds)

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", Precision.parse(self.precision, TRAIN_PRECISIONS))
        checks = [
            (self.dataset in LOADERS,
             f"unknown dataset {self.dataset!r}; choose one of: {', '.join(LOADERS)}"),
            (self.model in MODELS,
             f"unknown model {self.model!r}; choose one of: {', '.join(sorted(MODELS))}"),
            (self.batch_size > 0, f"batch_size must be > 0, got {self.batch_size}"),
            (self.learning_rate > 0 and math.isfinite(self.learning_rate),
             f"learning_rate must be a finite number > 0, got {self.learning_rate}"),
            (self.epochs > 0 or self.max_steps > 0,
             "give epochs > 0 or max_steps > 0 (training needs a budget)"),
            (self.epochs >= 0 and self.max_steps >= 0, "epochs and max_steps must be >= 0"),
            (0 <= self.momentum < 1, f"momentum must be in [0, 1), got {self.momentum}"),
            (self.weight_decay >= 0, f"weight_decay must be >= 0, got {self.weight_decay}"),
            (self.optimizer in OPTIMIZERS,
             f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}"),
            (self.device in DEVICES,
             f"device must be one of {', '.join(DEVICES)}, got {self.device!r}"),
            (0 < self.target_accuracy <= 1,
             f"target_accuracy must be in (0, 1], got {self.target_accuracy}"),
            (self.warmup_steps >= 0, f"warmup_steps must be >= 0, got {self.warmup_steps}"),
            (self.warmup_budget_s > 0, f"warmup_budget_s must be > 0, got "
                                       f"{self.warmup_budget_s}"),
            (self.max_steps == 0 or self.max_steps >= self.warmup_steps,
             f"max_steps={self.max_steps} measures fewer steps than the {self.warmup_steps} "
             "unmeasured warm-up steps before them: raise max_steps or lower warmup_steps"),
            (self.stall_timeout_s > 0 and math.isfinite(self.stall_timeout_s),
             f"stall_timeout_s must be a finite number > 0, got {self.stall_timeout_s}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        refuse_emulated_bf16(self.precision, self.device)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> TrainConfig:
        """From raw entry-point params (strings allowed); empty values mean 'not given'; a
        ``preset``'s values first, the params given over them."""
        preset = params.get("preset")
        merged = {**(get_preset(str(preset)) if preset else {}), **params}
        return config_from_params(cls, merged, "training")

    def as_params(self) -> dict[str, Any]:
        """Flat params for MLflow (parallelism and validity settings as their own keys)."""
        flat = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in NESTED}
        return {**flat, **nested_params(self.parallelism, self.validity)}


#: Settings kept in their own values, given and logged as flat params.
NESTED = {"parallelism", "validity"}
NESTED_KEYS = {f.name for f in fields(ParallelismSettings)} | {
    f.name for f in fields(ValidityThresholds)}


def accepted_params(config_class: type) -> set[str]:
    """Every param an entry point's config (``TrainConfig``, ``InferConfig``) takes: its own
    fields and the flat names of the settings it keeps nested."""
    return ({f.name for f in fields(config_class)} - NESTED) | NESTED_KEYS


def pop_parallelism(params: dict[str, Any]) -> ParallelismSettings:
    """Take the parallelism params out of ``params`` (strings allowed)."""
    names = {f.name for f in fields(ParallelismSettings)}
    given = {k: params.pop(k) for k in list(params) if k in names}
    return ParallelismSettings.from_params(
        **{k: (str(v) if k in STRING_SETTINGS else as_int(k, v)) for k, v in given.items()})


def nested_params(parallelism: ParallelismSettings, validity: ValidityThresholds
                  ) -> dict[str, Any]:
    """Parallelism and validity settings as flat params ('' for a framework default)."""
    flat: dict[str, Any] = asdict(validity)
    for f in fields(ParallelismSettings):
        value = getattr(parallelism, f.name)
        flat[f.name] = "" if value is None else (
            ",".join(map(str, value)) if isinstance(value, tuple) else value)
    return flat


def parse_cli_params(argv: Sequence[str]) -> dict[str, str]:
    """``--key value`` pairs (what MLflow Projects appends) into a dict."""
    params: dict[str, str] = {}
    items = list(argv)
    while items:
        key = items.pop(0)
        if not key.startswith("--") or not items:
            raise ConfigError(f"expected '--name value' pairs, got {key!r}; e.g. --batch_size 32")
        params[key[2:].replace("-", "_")] = items.pop(0)
    return params


C = TypeVar("C")


def config_from_params(cls: type[C], params: Mapping[str, Any], kind: str,
                       parsers: Mapping[str, Callable[[Any], Any]] | None = None) -> C:
    """An entry point's config (``TrainConfig``, ``InferConfig``) from its raw params, the one
    way: empty values mean 'not given'; the parallelism and validity settings go to their
    own values; an unknown name is refused with every valid one (``kind`` names the entry);
    each value is typed by its field's default, or by ``parsers[name]``."""
    given = {k: v for k, v in params.items() if v is not None and v != ""}
    settings = pop_parallelism(given)
    validity = ValidityThresholds.pop_from(given)
    unknown = sorted(set(given) - ({f.name for f in fields(cls)} - NESTED))  # type: ignore[arg-type]
    if unknown:
        raise ConfigError(f"unknown {kind} parameter(s): {', '.join(unknown)}; valid: "
                          f"{', '.join(sorted(accepted_params(cls)))}")
    parsers = parsers or {}
    typed = {k: parsers[k](v) if k in parsers else _coerce(k, v, cls) for k, v in given.items()}
    return cls(**typed, parallelism=settings, validity=validity)


def _coerce(name: str, value: Any, cls: type) -> Any:
    default = next(f.default for f in fields(cls) if f.name == name)
    if default is MISSING or isinstance(default, str):  # a required name, or text
        return str(value)
    if isinstance(default, bool):
        return as_bool(name, value)
    if isinstance(default, int):
        return as_int(name, value)
    if isinstance(default, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be a number, got {value!r}") from None
    return value


def as_int(name: str, value: Any) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be an integer, got {value!r}") from None
    if not number.is_integer():
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    return int(number)


def as_bool(name: str, value: Any) -> bool:
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")
