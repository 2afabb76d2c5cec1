"""A study spec's search space: each searched parameter (a :class:`Dimension`) validated
from its YAML, the grid it makes, and the credentials it must never hold."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.redaction import holds_secret

#: the largest magnitude an int range may reach (a batch size of 10^300 trains nothing)
MAX_INT_BOUND = 2**31 - 1
#: the most points a grid study may have (each is at least one measured run), counted from
#: the spec before any point is made
MAX_GRID_POINTS = 10_000


@dataclass(frozen=True)
class Dimension:
    """One searched parameter."""

    name: str
    kind: str  # float | int | categorical
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()


def samples(d: Dimension) -> tuple[Any, ...]:
    """Values that stand for a dimension: every choice; the bounds and a middle value, off
    whole numbers for a float range (so a float range on an integer parameter is caught)."""
    if d.kind == "categorical":
        return d.choices
    if d.kind == "int":
        return int(d.low), int(d.high)
    middle = (d.low + d.high) / 2
    if d.step is not None:
        middle = d.low + d.step * math.floor((d.high - d.low) / d.step / 2)
    elif d.low < math.floor(middle) + 0.5 < d.high:
        middle = math.floor(middle) + 0.5
    return d.low, middle, d.high


def dimension(name: str, d: Any) -> Dimension:
    where = f"search_space.{name}"
    if isinstance(d, list):  # shorthand: a list is a categorical choice
        d = {"type": "categorical", "choices": d}
    if not isinstance(d, Mapping):
        raise ConfigError(f"study spec: {where}: give a mapping such as "
                          "{type: int, low: 1, high: 4} or a list of choices")
    kind = d.get("type")
    if kind == "categorical":
        choices = d.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ConfigError(f"study spec: {where}.choices: give a non-empty list")
        if not all(c is None or isinstance(c, bool | int | float | str) for c in choices):
            raise ConfigError(f"study spec: {where}.choices: each choice must be a number, "
                              "string, true/false or null (write a list as '1,8,32')")
        return Dimension(name, kind, choices=tuple(choices))
    if kind not in ("float", "int"):
        raise ConfigError(f"study spec: {where}.type: {kind!r} is not one of float, int, "
                          "categorical")
    low, high = (finite(d.get(k), f"{where}.{k}") for k in ("low", "high"))
    if not low < high:
        raise ConfigError(f"study spec: {where}: low ({low}) must be below high ({high})")
    log = d.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"study spec: {where}.log: write true or false (unquoted), got "
                          f"{log!r}")
    if log and low <= 0:
        raise ConfigError(f"study spec: {where}: log scale needs low > 0")
    step = None if d.get("step") is None else finite(d["step"], f"{where}.step")
    if step is not None and step <= 0:
        raise ConfigError(f"study spec: {where}.step: must be > 0, got {step:g}")
    if kind == "int" and (not low.is_integer() or not high.is_integer()):
        raise ConfigError(f"study spec: {where}: int bounds must be integers")
    if kind == "int" and max(abs(low), abs(high)) > MAX_INT_BOUND:
        raise ConfigError(f"study spec: {where}: int bounds must lie within "
                          f"±{MAX_INT_BOUND:,}, got {low:g} to {high:g}")
    return Dimension(name, kind, low, high, log, step)


def finite(value: Any, where: str) -> float:
    """``value`` as a finite number, else a one-line error naming ``where``. A numeric
    string counts (YAML reads ``1e-4``, without a dot, as one)."""
    number = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise ConfigError(f"study spec: {where}: must be a finite number, got {value!r}")
    return number


def grid_size(space: tuple[Dimension, ...], frameworks: int = 1) -> int:
    """How many points the grid over ``space`` has (times the frameworks searched), counted
    without making them."""
    size = max(frameworks, 1)
    for d in space:
        if d.kind == "categorical":
            size *= len(d.choices)
        else:
            size *= int(math.floor((d.high - d.low) / d.step + 1e-9)) + 1
    return size


def refuse_huge_grid(space: tuple[Dimension, ...], frameworks: int) -> None:
    size = grid_size(space, frameworks)
    if size > MAX_GRID_POINTS:
        shape = " x ".join(str(grid_size((d,))) for d in space)
        raise ConfigError(f"study spec: the grid has {size:,} points ({shape}), more than the "
                          f"{MAX_GRID_POINTS:,} a grid study may have; widen the steps, list "
                          "fewer choices, or use sampler: tpe or random with n_trials")


def refuse_secret(where: str, name: str, value: Any) -> None:
    """A credential in a spec would be logged (MLflow logs every parameter of a run, and the
    study's storage and report keep them): refused, with where to put it instead."""
    if holds_secret(name, value):
        raise ConfigError(f"study spec: {where}: looks like a credential, and every parameter "
                          "is stored in plain text (run params, the study's storage, the "
                          "report); pass it to your code through an environment variable "
                          "instead, and keep it out of the spec")


def parse_space(raw: Mapping[str, Any]) -> tuple[Dimension, ...]:
    """``search_space``: a mapping of parameter names to their ranges or choices."""
    space = raw.get("search_space") or {}
    if not isinstance(space, Mapping) or not all(isinstance(k, str) for k in space):
        raise ConfigError("study spec: search_space: give a mapping of parameter name to "
                          "choices or a range, e.g. {batch_size: [32, 64]}")
    dimensions = tuple(dimension(name, d) for name, d in space.items())
    for d in dimensions:
        for value in samples(d):
            refuse_secret(f"search_space.{d.name}", d.name, value)
    return dimensions
