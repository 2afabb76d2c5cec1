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


def distributions(spec: StudySpec) -> dict[str, optuna.distributions.BaseDistribution]:
    """The Optuna distribution of each sampled name, as :func:`suggest` asks for it."""
    found: dict[str, optuna.distributions.BaseDistribution] = {}
    if len(spec.frameworks) > 1:
        found["framework"] = optuna.distributions.CategoricalDistribution(list(spec.frameworks))
    for d in spec.search_space:
        if d.kind == "categorical":
            found[d.name] = optuna.distributions.CategoricalDistribution(list(d.choices))
        elif d.kind == "int":
            found[d.name] = optuna.distributions.IntDistribution(
                int(d.low), int(d.high), step=int(d.step or 1), log=d.log)
        else:
            found[d.name] = optuna.distributions.FloatDistribution(
                d.low, d.high, step=d.step, log=d.log)
    return found


def changed_since_begun(spec: StudySpec, trials: list[optuna.trial.FrozenTrial]) -> list[str]:
    """The sampled names whose distribution the spec changed in a way Optuna refuses for a
    study that has trials (another kind, other choices), each with before and now."""
    now = distributions(spec)
    changed: dict[str, str] = {}
    for trial in trials:
        for name, before in trial.distributions.items():
            if name in now and name not in changed:
                try:
                    optuna.distributions.check_distribution_compatibility(before, now[name])
                except ValueError:
                    changed[name] = f"{name}: {_shown(before)} then, {_shown(now[name])} now"
    return list(changed.values())


def _shown(distribution: optuna.distributions.BaseDistribution) -> str:
    if isinstance(distribution, optuna.distributions.CategoricalDistribution):
        return f"choices {list(distribution.choices)}"
    kind = "int" if isinstance(distribution, optuna.distributions.IntDistribution) else "float"
    return f"{kind} {distribution.low}..{distribution.high}"  # type: ignore[attr-defined]


def suggest(trial: optuna.trial.Trial, spec: StudySpec) -> dict[str, Any]:
    """Sampled values for this trial (the framework too, when the spec names several)."""
    params: dict[str, Any] = {}
    for name, d in distributions(spec).items():
        if isinstance(d, optuna.distributions.CategoricalDistribution):
            params[name] = trial.suggest_categorical(name, list(d.choices))
        elif isinstance(d, optuna.distributions.IntDistribution):
            params[name] = trial.suggest_int(name, d.low, d.high, step=d.step, log=d.log)
        else:
            params[name] = trial.suggest_float(name, d.low, d.high, step=d.step, log=d.log)
    return params
