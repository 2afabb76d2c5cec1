"""From a spec to Optuna: samplers, pruners, and parameter suggestions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import optuna

from mlflow_dlaas.tuning.grid import GridByValueSampler
from mlflow_dlaas.tuning.spec import Dimension, StudySpec


def make_sampler(spec: StudySpec, trials_before: int = 0) -> optuna.samplers.BaseSampler:
    """The spec's sampler. Constraints need no ``constraints_func`` (deprecated in Optuna 5):
    the driver stores each trial's values where every sampler reads them
    (:mod:`~mlflow_dlaas.tuning.feasibility`). A seeded study resumed with ``trials_before``
    trials is seeded from its seed and that count, so that it does not draw its first
    trials' settings again (a fresh sampler with the study's seed would)."""
    seed = sampler_seed(spec.seed, trials_before)
    if spec.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if spec.sampler == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    if spec.sampler == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if spec.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return GridByValueSampler(grid_space(spec))  # by value, in the spec's order: no seed


def sampler_seed(seed: int | None, trials_before: int) -> int | None:
    """The study's seed for a fresh study; for a resumed one, a seed derived from it and the
    number of trials it already holds (the same resume draws the same, a later one anew)."""
    if seed is None or trials_before == 0:
        return seed
    return int(np.random.SeedSequence([seed, trials_before]).generate_state(1)[0])


def grid_space(spec: StudySpec) -> dict[str, list[Any]]:
    space = {d.name: list(d.choices) if d.kind == "categorical" else _steps(d)
             for d in spec.search_space}
    if len(spec.frameworks) > 1:
        space["framework"] = list(spec.frameworks)
    return space


def _steps(d: Dimension) -> list[float | int]:
    count = int(math.floor((d.high - d.low) / d.step + 1e-9)) + 1
    values = [d.low + i * d.step for i in range(count)]
    return [int(v) for v in values] if d.kind == "int" else values


def suggest(trial: optuna.trial.Trial, spec: StudySpec) -> dict[str, Any]:
    """Sampled values for this trial (the framework too, when the spec names several)."""
    params: dict[str, Any] = {}
    if len(spec.frameworks) > 1:
        params["framework"] = trial.suggest_categorical("framework", list(spec.frameworks))
    for d in spec.search_space:
        if d.kind == "categorical":
            params[d.name] = trial.suggest_categorical(d.name, list(d.choices))
        elif d.kind == "int":
            params[d.name] = trial.suggest_int(d.name, int(d.low), int(d.high),
                                               step=int(d.step or 1), log=d.log)
        else:
            params[d.name] = trial.suggest_float(d.name, d.low, d.high, step=d.step, log=d.log)
    return params
