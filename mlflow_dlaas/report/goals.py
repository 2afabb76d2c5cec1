"""Objectives and constraints as written: ``time_to_accuracy@0.98``, ``peak_memory<=2GiB``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.report.derived import ENERGY, ENERGY_PER_1000, PEAK_MEMORY
from mlflow_dlaas.run_schema import current_name, unit_factor
from mlflow_dlaas.tuning.spec import METRIC_ALIASES

_MAXIMIZED = {METRIC_ALIASES[a] for a in ("accuracy", "inference_throughput", "throughput")}
#: alias: (metric key, the direction that is better). The study spec's aliases, plus the
#: report's own; three differ: ``energy`` here is the derived whole-run total (CPU packages and
#: GPUs), ``throughput`` the inference (offline) throughput, as a report reader means it, and
#: ``peak_rss`` the derived peak memory (the measured phases', else the process tree's).
ALIASES: dict[str, tuple[str, str]] = {
    **{alias: (metric, "maximize" if metric in _MAXIMIZED else "minimize")
       for alias, metric in METRIC_ALIASES.items()
       if alias not in ("energy", "throughput", "peak_rss")},
    "peak_memory": (PEAK_MEMORY, "minimize"),
    "peak_rss": (PEAK_MEMORY, "minimize"),
    "energy": (ENERGY, "minimize"),
    "energy_per_1000_predictions": (ENERGY_PER_1000, "minimize"),
    "throughput": (METRIC_ALIASES["inference_throughput"], "maximize"),
    "train_throughput": (METRIC_ALIASES["throughput"], "maximize"),
}
_TIME_TO = re.compile(r"time_to_accuracy@(?P<target>0?\.\d+|1(\.0*)?)")
_CONSTRAINT = re.compile(r"\s*(?P<name>[\w/.@]+)\s*(?P<op><=|>=|<|>)\s*"
                         r"(?P<value>[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)\s*(?P<unit>[A-Za-z%]*)\s*")
_HOW = ("objectives: an alias (" + ", ".join(sorted(ALIASES)) + "), time_to_accuracy@0.98, "
        "or min:METRIC / max:METRIC for any logged metric key")


def time_to_accuracy_key(target: float) -> str:
    return f"time_to_{target:g}_accuracy_seconds"


@dataclass(frozen=True)
class Goal:
    """What to optimize: a metric key (as logged or derived) and its better direction."""

    metric: str
    direction: str
    text: str
    accuracy_target: float | None = None


@dataclass(frozen=True)
class Bound:
    """A constraint: the metric's median over replicates must satisfy ``op value``."""

    metric: str
    op: str
    value: float
    text: str

    def holds(self, observed: float) -> bool:
        return {"<=": observed <= self.value, ">=": observed >= self.value,
                "<": observed < self.value, ">": observed > self.value}[self.op]


def parse_goal(text: str) -> Goal:
    """``accuracy``, ``time_to_accuracy@0.98``, ``min:run/peak_proc_rss_megabytes`` ..."""
    text = text.strip()
    found = _TIME_TO.fullmatch(text)
    if found:
        target = float(found.group("target"))
        return Goal(time_to_accuracy_key(target), "minimize", text, target)
    if text in ALIASES:
        metric, direction = ALIASES[text]
        return Goal(metric, direction, text)
    prefix, _, metric = text.partition(":")
    if prefix in ("min", "max") and metric:
        return Goal(ALIASES.get(metric, (current_name(metric)[0], ""))[0],
                    "minimize" if prefix == "min" else "maximize", text)
    raise ConfigError(f"objective {text!r} is not understood; {_HOW}")


def parse_bound(text: str) -> Bound:
    """``accuracy>=0.98``, ``peak_memory<=2GiB``, ``p99_latency<5`` (ms), any metric key."""
    found = _CONSTRAINT.fullmatch(text)
    if not found:
        raise ConfigError(f"constraint {text!r} is not understood; write NAME OP VALUE with OP "
                          "one of <=, >=, <, > (e.g. 'accuracy>=0.98', 'peak_memory<=2GiB', "
                          "'p99_latency<=5')")
    name = found.group("name")
    goal = parse_goal(name if (name in ALIASES or _TIME_TO.fullmatch(name)) else f"min:{name}")
    value = float(found.group("value")) * unit_factor(goal.metric, found.group("unit"),
                                                      f"constraint {text!r}")
    return Bound(goal.metric, found.group("op"), value, text)
