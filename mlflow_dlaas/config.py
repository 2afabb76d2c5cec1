"""Typed, validated, frozen run configurations built from entry-point params."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from mlflow_dlaas.data import DEFAULT_DATASET
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.presets import get_preset

OPTIMIZERS = ("sgd", "adam")
DEVICES = ("cpu", "cuda")


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
    warmup_steps: int = 5
    device: str = "cpu"
    jit_compile: bool = False
    channels_last: bool = False
    hybridize: bool = True
    preset: str = ""
    monitor_interval: float = 0.2
    log_model: bool = True
    parallelism: ParallelismSettings = field(default_factory=ParallelismSettings)

    def __post_init__(self) -> None:
        checks = [
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
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> TrainConfig:
        """From raw entry-point params (strings allowed); empty values mean 'not given'."""
        given = {k: v for k, v in params.items() if v is not None and v != ""}
        merged: dict[str, Any] = {}
        if given.get("preset"):
            merged.update(get_preset(str(given["preset"])))
        merged.update(given)
        parallel_keys = {f.name for f in fields(ParallelismSettings)}
        parallel = {k: merged.pop(k) for k in list(merged) if k in parallel_keys}
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(merged) - set(known))
        if unknown:
            raise ConfigError(f"unknown training parameter(s): {', '.join(unknown)}; valid: "
                              f"{', '.join(sorted(set(known) | parallel_keys))}")
        typed = {k: _coerce(k, v, cls) for k, v in merged.items()}
        settings = ParallelismSettings.from_params(
            **{k: (str(v) if k == "cpu_affinity" else as_int(k, v)) for k, v in parallel.items()}
        )
        return cls(**typed, parallelism=settings)

    def as_params(self) -> dict[str, Any]:
        """Flat params for MLflow (parallelism settings as their own keys)."""
        flat = asdict(self)
        settings = flat.pop("parallelism")
        flat.update({k: ("" if v is None else v) for k, v in settings.items()})
        if flat["cpu_affinity"]:
            flat["cpu_affinity"] = ",".join(map(str, flat["cpu_affinity"]))
        return flat


def _coerce(name: str, value: Any, cls: type) -> Any:
    default = next(f.default for f in fields(cls) if f.name == name)
    if name == "framework" or isinstance(default, str):
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
