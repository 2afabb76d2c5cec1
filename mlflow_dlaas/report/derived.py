"""Metrics the report derives from logged ones: energy totals, per-batch inference rows."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

ENERGY = "energy_joules"
ENERGY_PER_1000 = "energy_per_1000_predictions_joules"
_ENERGY_KEY = re.compile(r"metrics\.(?P<phase>[a-z_]+)/(cpu_package|gpu)\d+_energy_joules")
_BATCH_KEY = re.compile(r"metrics\.(?P<scenario>[a-z_]+)/batch_(?P<batch>\d+)/(?P<name>.+)")
BATCHED_SCENARIOS = ("single_stream", "offline")


def energy_by_phase(runs: pd.DataFrame) -> dict[str, list[str]]:
    """Energy metric columns grouped by monitor phase (CPU packages and GPUs together)."""
    phases: dict[str, list[str]] = {}
    for column in runs.columns:
        found = _ENERGY_KEY.fullmatch(column)
        if found:
            phases.setdefault(found.group("phase"), []).append(column)
    return phases


def add_energy(runs: pd.DataFrame) -> pd.DataFrame:
    """``metrics.energy_joules``: the whole run's measured energy (NaN where none was readable)."""
    runs = runs.copy()
    whole_run = energy_by_phase(runs).get("run", [])
    runs[f"metrics.{ENERGY}"] = (runs[whole_run].sum(axis=1, min_count=1) if whole_run
                                 else np.nan)
    return runs


def inference_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (inference run, batch size), batch keys folded back to plain ones.

    ``metrics.offline/batch_32/throughput_samples_per_second`` becomes the row of batch 32's
    ``metrics.offline/throughput_samples_per_second``; run-wide metrics repeat on every row;
    ``metrics.energy_per_1000_predictions_joules`` is the scenarios' energy per sample served.
    """
    batched: dict[int, dict[str, str]] = {}
    for column in runs.columns:
        found = _BATCH_KEY.fullmatch(column)
        if found:
            plain = f"metrics.{found.group('scenario')}/{found.group('name')}"
            batched.setdefault(int(found.group("batch")), {})[column] = plain
    folded = {plain for renames in batched.values() for plain in renames.values()}
    # the plain keys hold only the last batch size logged: the batch rows replace them
    shared = [c for c in runs.columns if not _BATCH_KEY.fullmatch(c) and c not in folded]
    energy = _energy_per_1000(runs)
    frames = []
    for batch, renames in sorted(batched.items()):
        frame = runs[shared + list(renames)].rename(columns=renames)
        frame = frame[frame[list(renames.values())].notna().any(axis=1)].copy()
        frame["batch_size"] = batch
        frame[f"metrics.{ENERGY_PER_1000}"] = energy.loc[frame.index]
        frames.append(frame)
    if not frames:
        return runs.iloc[0:0].assign(batch_size=pd.Series(dtype=int))
    return pd.concat(frames, ignore_index=True)


def _energy_per_1000(runs: pd.DataFrame) -> pd.Series:
    phases = energy_by_phase(runs)
    joules = pd.Series(np.nan, index=runs.index)
    samples = pd.Series(0.0, index=runs.index)
    for scenario in BATCHED_SCENARIOS:
        total = f"metrics.{scenario}/samples_total"
        if scenario in phases and total in runs:
            joules = joules.add(runs[phases[scenario]].sum(axis=1, min_count=1), fill_value=0)
            samples = samples.add(runs[total].fillna(0))
    return (joules / samples.replace(0, np.nan)) * 1000
