"""The report's "parallel libraries" table: per workload and framework, each library
setting's training time and peak memory against the framework's default, like for like.

A setting's runs are set against the default's only where both ran with everything else
equal (:func:`mlflow_dlaas.report.comparable.match`: the workload, the other settings, the
hyper-parameters): one cell per such combination. Where a study varied several settings,
the comparison pools over the cells where both sides ran, relabelling within cells only (a
stratified test), and the row names what it held and what it pooled over. Runs with no
counterpart are counted apart and never pooled. Each verdict is the effect's ratio with its
95 % interval (:mod:`mlflow_dlaas.report.effect`).
"""

from __future__ import annotations

import pandas as pd

from mlflow_dlaas.figures import significant
from mlflow_dlaas.libraries.settings import LIBRARY_SETTINGS
from mlflow_dlaas.report.comparable import Matching, by_workload, match
from mlflow_dlaas.report.derived import PEAK_MEMORY
from mlflow_dlaas.report.formatting import setting_text
from mlflow_dlaas.report.tables import ComparisonTable
from mlflow_dlaas.runs.schema import TRAIN_TIME, WALL_TIME

TITLE = "Parallel libraries (training, against each framework's default, like for like)"
PROJECT_TITLE = "Parallel libraries (your project, against its default, like for like)"
#: (heading with its unit, metric key)
Measure = tuple[str, str]
MEASURES: tuple[Measure, ...] = (("train time (s)", TRAIN_TIME),
                                 ("peak memory (MB)", PEAK_MEMORY))
#: A user's project: its whole command's wall time (what mlflow-dlaas can time from outside).
PROJECT_MEASURES: tuple[Measure, ...] = (("wall time (s)", WALL_TIME),
                                         ("peak memory (MB)", PEAK_MEMORY))
DEFAULTS = ("", "default")


def libraries_table(train: pd.DataFrame, measures: tuple[Measure, ...] = MEASURES,
                    title: str = TITLE) -> ComparisonTable | None:
    """The table over ``train`` (training runs, or a project's), or None where no run
    changed a library setting."""
    columns = [f"params.{s}" for s in LIBRARY_SETTINGS if f"params.{s}" in train]
    if train.empty or not columns:
        return None
    workloads = by_workload(train)
    headings = [*(["workload"] if len(workloads) > 1 else []), "system", "setting", "value",
                "runs vs default runs", "held fixed", "pooled over"]
    for heading, _ in measures:
        headings += [heading, f"{heading.split(' (')[0]} vs default"]
    cells, hints, stats = [], [], []
    for workload in workloads:
        for system, runs in workload.rows.groupby("system", sort=True):
            for column in columns:
                values = runs[column].fillna("").astype(str)
                for value in sorted(set(values) - set(DEFAULTS)):
                    matching = match(runs, column, [value], DEFAULTS)
                    row, hint, numbers = _row(str(system), column, value, matching, measures)
                    prefix = [workload.label] if len(workloads) > 1 else []
                    cells.append(prefix + row)
                    hints.append([""] * len(prefix) + hint)
                    stats.append({"workload": workload.label, **numbers})
    if not cells:
        return None
    return ComparisonTable(title, headings, cells, hints, pd.DataFrame(stats),
                           _notes(pd.DataFrame(stats)))


def _row(system: str, column: str, value: str, matching: Matching,
         measures: tuple[Measure, ...]) -> tuple[list[str], list[str], dict[str, object]]:
    setting = column.removeprefix("params.")
    chosen, baseline = matching.chosen_ids, matching.baseline_ids
    lone = len(matching.unmatched_chosen) + len(matching.unmatched_baseline)
    count = f"{len(chosen)} vs {len(baseline)}"
    if not matching.cells:
        count = f"no counterpart ({len(matching.unmatched_chosen)} runs)"
    cells = [system, setting, setting_text(value), count,
             ", ".join(matching.held()) or "—", ", ".join(matching.pooled()) or "nothing"]
    hints = ["", "", "", f"{lone} runs without a counterpart left out" if lone else "",
             "", ""]
    numbers: dict[str, object] = {
        "system": system, "setting": setting, "value": value, "runs": len(chosen),
        "run_ids": chosen, "default runs": len(baseline), "default_run_ids": baseline,
        "cells": len(matching.cells), "held": "; ".join(matching.held()),
        "pooled_over": "; ".join(matching.pooled()),
        "unmatched_run_ids": list(matching.unmatched_chosen),
        "unmatched_default_run_ids": list(matching.unmatched_baseline)}
    for heading, metric in measures:
        key = f"metrics.{metric}"
        got = [v for c in matching.cells for v in _values(c.chosen, key)]
        if not matching.cells:
            cells += ["—", "no default run equal in everything else: not compared"]
            hints += ["", ""]
            numbers[f"{metric}|verdict"] = "no counterpart"
            continue
        effect = matching.effect(key, lower_is_better=True)
        cells += [_spread(got), effect.words()]
        hints += [f"{heading}: median [interquartile range] of the setting's matched runs",
                  effect.test_text()]
        numbers.update({f"{metric}|median": _median(got), f"{metric}|ratio": effect.ratio,
                        f"{metric}|ci_low": effect.low, f"{metric}|ci_high": effect.high,
                        f"{metric}|p": effect.p_value, f"{metric}|verdict": effect.verdict.value,
                        f"{metric}|test": effect.test_text()})
    return cells, hints, numbers


def _notes(stats: pd.DataFrame) -> list[str]:
    notes = []
    lone = stats[stats["cells"] == 0]
    if len(lone):
        notes.append(f"{len(lone)} settings have no run of their framework at the default "
                     "with everything else equal: run the default beside them (same workload, "
                     "threads, other libraries) to compare them")
    return notes


def _values(rows: pd.DataFrame, key: str) -> list[float]:
    if key not in rows:
        return []
    return [float(v) for v in pd.to_numeric(rows[key], errors="coerce").dropna()]


def _median(values: list[float]) -> float:
    return float(pd.Series(values, dtype=float).median())


def _spread(values: list[float]) -> str:
    """``median [q1–q3]`` at three significant digits (one run: its value; none: —)."""
    if not values:
        return "—"
    series = pd.Series(values, dtype=float)
    text = significant(series.median())
    if len(values) > 1:
        text += f" [{significant(series.quantile(0.25))}–{significant(series.quantile(0.75))}]"
    return text
