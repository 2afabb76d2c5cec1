"""The one grammar of objectives and bounds, read by study specs, ``compare``, ``recommend``
and ``reproduce``: an alias (:data:`~mlflow_dlaas.runs.schema.ALIASES`),
``time_to_accuracy@0.98``, ``min:KEY`` / ``max:KEY`` for any logged key; a bound is
``NAME OP VALUE[UNIT]`` (``peak_memory<=2GiB``, ``p99_latency<5``) or, in a spec, the same
three parts as a mapping."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.runs.schema import ALIASES, AMBIGUOUS, current_name, unit_factor

DIRECTIONS = ("maximize", "minimize")
REDUCTIONS = ("last", "min", "max")
OPS = ("<=", ">=", "<", ">")
_TIME_TO = re.compile(r"time_to_accuracy@(?P<target>0?\.\d+|1(\.0*)?)")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"\s*(?P<value>{_NUMBER})\s*(?P<unit>[A-Za-z%]*)\s*")
_BOUND = re.compile(rf"\s*(?P<name>[\w/.@]+)\s*(?P<op><=|>=|<|>)\s*(?P<quantity>{_NUMBER}"
                    r"\s*[A-Za-z%]*)\s*")
HOW = ("an alias (" + ", ".join(sorted(ALIASES)) + "), time_to_accuracy@0.98, "
       "or min:METRIC / max:METRIC for any logged metric key")


def parse_asks(objectives: tuple[str, ...], constraints: tuple[str, ...]
               ) -> list[tuple[Goal, tuple[Bound, ...]]]:
    """Each objective with every constraint: what ``compare --objective`` and ``recommend``
    are asked; ConfigError for a constraint without an objective or one not understood."""
    bounds: tuple[Bound, ...] = tuple(parse_bound(c) for c in constraints)
    if bounds and not objectives:
        raise ConfigError("--constraint needs an --objective to constrain")
    return [(parse_goal(o), bounds) for o in objectives]


def time_to_accuracy_key(target: float) -> str:
    return f"time_to_{target:g}_accuracy_seconds"


@dataclass(frozen=True)
class Goal:
    """What to optimize: a metric key (as logged or derived) and its better direction."""

    metric: str
    direction: str
    text: str = ""
    accuracy_target: float | None = None
    #: which value of the metric's history counts: the last logged, or its min or max
    reduce: str = "last"


@dataclass(frozen=True)
class Bound:
    """A bound on a metric (a run's value, or the median over replicates)."""

    metric: str
    op: str
    value: float
    text: str = ""

    def holds(self, observed: float) -> bool:
        return {"<=": observed <= self.value, ">=": observed >= self.value,
                "<": observed < self.value, ">": observed > self.value}[self.op]

    def violation(self, observed: float) -> float:
        """How far ``observed`` is on the wrong side, 0 when the bound holds (Optuna's
        constraint value, feasible when <= 0)."""
        if self.holds(observed):
            return 0.0
        return max(abs(observed - self.value), math.ulp(self.value))


def metric_key(name: str) -> str:
    """An alias's metric key, or a key an earlier version logged under its current name."""
    _refuse_ambiguous(name)
    return ALIASES[name].metric if name in ALIASES else current_name(name)[0]


def parse_goal(text: str) -> Goal:
    """``accuracy``, ``time_to_accuracy@0.98``, ``min:run/peak_proc_rss_megabytes`` ..."""
    text = text.strip()
    found = _TIME_TO.fullmatch(text)
    if found:
        target = float(found.group("target"))
        return Goal(time_to_accuracy_key(target), "minimize", text, target)
    _refuse_ambiguous(text)
    if text in ALIASES:
        return Goal(ALIASES[text].metric, ALIASES[text].direction, text)
    prefix, _, metric = text.partition(":")
    if prefix in ("min", "max") and metric:
        key, direction = metric_key(metric), "minimize" if prefix == "min" else "maximize"
        return Goal(key, direction, _plain_name(key, direction))
    raise ConfigError(f"objective {text!r} is not understood; objectives: {HOW}")


def _plain_name(key: str, direction: str) -> str:
    """The alias that names ``key`` in ``direction`` (``train_time``), else the key itself:
    an answer reads "lowest train_time", not "lowest min:Headline/train_time_seconds"."""
    return next((name for name, alias in sorted(ALIASES.items())
                 if alias.metric == key and alias.direction == direction), key)


def goal(name: str, direction: str, where: str, reduce: Any = "last") -> Goal:
    """A spec's ``{metric: NAME, direction: ..., reduce: last|min|max}``."""
    if direction not in DIRECTIONS:
        raise ConfigError(f"{where}.direction: {direction!r} is not one of "
                          f"{', '.join(DIRECTIONS)}")
    if reduce not in REDUCTIONS:
        raise ConfigError(f"{where}.reduce: {reduce!r} is not one of {', '.join(REDUCTIONS)} "
                          "(which value of the metric's history counts)")
    text = f"{direction} {name}" + ("" if reduce == "last" else f" ({reduce} over its history)")
    return Goal(metric_key(name), direction, text, reduce=reduce)


def parse_bound(text: str) -> Bound:
    """``accuracy>=0.98``, ``peak_memory<=2GiB``, ``p99_latency<5`` (ms), any metric key."""
    found = _BOUND.fullmatch(text)
    if not found:
        raise ConfigError(f"constraint {text!r} is not understood; write NAME OP VALUE with OP "
                          "one of <=, >=, <, > (e.g. 'accuracy>=0.98', 'peak_memory<=2GiB', "
                          "'p99_latency<=5')")
    name = found.group("name")
    metric = (parse_goal(name).metric if name in ALIASES or _TIME_TO.fullmatch(name)
              else metric_key(name))
    return Bound(metric, found.group("op"),
                 quantity(found.group("quantity"), metric, f"constraint {text!r}"), text)


def bound(name: str, op: Any, value: Any, where: str) -> Bound:
    """A spec's ``{metric: NAME, op: '<=', value: 4GiB}``."""
    if op not in OPS:
        raise ConfigError(f"{where}.op: {op!r} is not one of {', '.join(OPS)}")
    metric = metric_key(name)
    return Bound(metric, op, quantity(value, metric, f"{where}.value"), f"{name}{op}{value}")


def quantity(value: Any, metric: str, where: str) -> float:
    """A bound's value in ``metric``'s unit: a number, or a number with a unit (``4GiB`` for
    a memory metric, ``250ms`` for a time, ``98%`` for an accuracy)."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: must be a number, got {value!r}")
    if isinstance(value, str):
        found = _QUANTITY.fullmatch(value)
        if found is None:
            raise ConfigError(f"{where}: {value!r} is not a number with an optional unit "
                              "(e.g. 0.9, 4GiB, 250ms)")
        number = float(found["value"]) * unit_factor(metric, found["unit"], where)
    else:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{where}: must be a finite number, got {value!r}")
    return number


def _refuse_ambiguous(name: str) -> None:
    if name in AMBIGUOUS:
        raise ConfigError(f"{name!r} names two figures; write {AMBIGUOUS[name]}")
