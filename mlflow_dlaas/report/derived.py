"""Metrics the report derives from logged ones: peak memory, energy totals, per-batch
inference rows."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from mlflow_dlaas.report.energy_estimate import (
    ESTIMATED,
    SOURCE_COLUMN,
    add_estimates,
    energy_sources,
)
from mlflow_dlaas.runs import schema

#: the framework's own peak (the measured worker: train phase, or measured scenarios); the
#: report fills it, for runs without it, with the process tree's peak
PEAK_MEMORY = schema.PEAK_MEMORY
#: the whole process tree's peak over the run, harness included: older runs have only this
TREE_PEAK = f"run/{schema.PHASE_PEAK_MEMORY}"
ENERGY = schema.WHOLE_RUN_ENERGY
ENERGY_PER_1000 = schema.ENERGY_PER_1000
_ENERGY_KEY = re.compile(r"metrics\.(?P<phase>[a-z_]+)/(cpu_package|gpu)\d+_energy_joules")
_BATCH_KEY = re.compile(r"metrics\.(?P<scenario>[a-z_]+)/batch_(?P<batch>\d+)/(?P<name>.+)")
BATCHED_SCENARIOS = ("single_stream", "offline")


def add_peak_memory(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run, in MB: ``metrics.Headline/peak_memory_megabytes``, the measured phases' peak
    it logged, or for a run without it, its process tree's ``run/peak_proc_rss_megabytes``."""
    measured = _column(runs, PEAK_MEMORY)
    return runs.assign(**{f"metrics.{PEAK_MEMORY}": measured.fillna(_column(runs, TREE_PEAK))})


def tree_peak_fallbacks(runs: pd.DataFrame) -> int:
    """Runs whose peak memory is the process tree's, for lack of the measured figure."""
    return int((_column(runs, PEAK_MEMORY).isna() & _column(runs, TREE_PEAK).notna()).sum())


def _column(runs: pd.DataFrame, metric: str) -> pd.Series:
    key = f"metrics.{metric}"
    return (pd.to_numeric(runs[key], errors="coerce") if key in runs
            else pd.Series(np.nan, index=runs.index))


def energy_by_phase(runs: pd.DataFrame) -> dict[str, list[str]]:
    """Energy metric columns grouped by monitor phase (CPU packages and GPUs together)."""
    phases: dict[str, list[str]] = {}
    for column in runs.columns:
        found = _ENERGY_KEY.fullmatch(column)
        if found:
            phases.setdefault(found.group("phase"), []).append(column)
    return phases


def add_energy(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run: ``metrics.whole_run_energy_joules`` and, for inference runs,
    ``metrics.energy_per_1000_predictions_joules`` (the batched scenarios' energy over the
    samples they served); NaN where no energy counter was readable; where none was, the
    estimate's ends from CPU time (:mod:`~mlflow_dlaas.report.energy_estimate`); and each
    run's :data:`SOURCE_COLUMN` (rapl, nvml, estimated)."""
    runs = runs.copy()
    whole_run = energy_by_phase(runs).get("run", [])
    runs[f"metrics.{ENERGY}"] = (runs[whole_run].sum(axis=1, min_count=1) if whole_run
                                 else np.nan)
    runs[f"metrics.{ENERGY_PER_1000}"] = _energy_per_1000(runs)
    runs[SOURCE_COLUMN] = energy_sources(runs, whole_run)
    return add_estimates(runs, runs[SOURCE_COLUMN] == ESTIMATED)


def batched_metrics(runs: pd.DataFrame) -> frozenset[str]:
    """The metric keys logged per batch size (``offline/throughput_samples_per_second`` ...)."""
    return frozenset(f"{m.group('scenario')}/{m.group('name')}"
                     for m in map(_BATCH_KEY.fullmatch, runs.columns) if m)


def inference_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (inference run, batch size), batch keys folded back to plain ones.

    ``metrics.offline/batch_32/throughput_samples_per_second`` becomes the row of batch 32's
    ``metrics.offline/throughput_samples_per_second``; run-wide metrics (load time, energy
    per 1,000 predictions) repeat on every row.
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
    frames = []
    for batch, renames in sorted(batched.items()):
        frame = runs[shared + list(renames)].rename(columns=renames)
        frame = frame[frame[list(renames.values())].notna().any(axis=1)].copy()
        frame["batch_size"] = batch
        frames.append(frame)
    if not frames:
        return runs.iloc[0:0].assign(batch_size=pd.Series(dtype=int))
    return pd.concat(frames, ignore_index=True)


def _energy_per_1000(runs: pd.DataFrame) -> pd.Series:
    phases = energy_by_phase(runs)
    joules = pd.Series(np.nan, index=runs.index)
    samples = pd.Series(0.0, index=runs.index)
    for scenario in BATCHED_SCENARIOS:
        total = f"metrics.{schema.scenario_key(scenario, schema.SAMPLES_TOTAL)}"
        if scenario in phases and total in runs:
            joules = joules.add(runs[phases[scenario]].sum(axis=1, min_count=1), fill_value=0)
            samples = samples.add(runs[total].fillna(0))
    return (joules / samples.replace(0, np.nan)) * 1000
