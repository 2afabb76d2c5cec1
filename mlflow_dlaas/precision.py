"""The numeric precision a run computes in, one type across processes: parsed once from a
param, compared as a value, logged as its text (``fp32``)."""

from __future__ import annotations

from enum import StrEnum

from mlflow_dlaas.errors import ConfigError


class Precision(StrEnum):
    """fp32; bf16 (a CPU with native bf16, a GPU); fp16 (a GPU); int8 (quantized)."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    INT8 = "int8"

    @classmethod
    def parse(cls, value: object, valid: tuple[Precision, ...] | None = None) -> Precision:
        """``value`` as a precision among ``valid`` (all by default), else a one-line
        ConfigError that lists them."""
        allowed = valid or tuple(cls)
        text = str(value).strip().lower()
        if text not in allowed:
            raise ConfigError(f"precision must be one of {', '.join(allowed)}, got {value!r}")
        return cls(text)
