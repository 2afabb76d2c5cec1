"""The pruners a spec names; the study's driver and each trial's entry process build the
same one."""

from __future__ import annotations

from typing import Any

PRUNERS = ("none", "median", "hyperband")


def make_pruner(name: str) -> Any:
    """The pruner ``name`` (a spec's ``pruner``); the driver and each trial's entry process
    build the same one."""
    import optuna  # here, for start-up: a spec is validated against PRUNERS without Optuna

    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner()
    return optuna.pruners.NopPruner()
