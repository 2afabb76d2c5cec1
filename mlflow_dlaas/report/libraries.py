"""The report's "parallel libraries" table: per framework, each library setting's training
time and peak memory against the framework's default, with spread and a verdict.

A setting's runs are compared with the same framework's runs that left that setting at its
default (the other settings as they were: marginal when a study varied several at once,
exact when each was run against the default alone, as ``benchmarks/libraries.py`` does). The
verdict is a two-sided Mann-Whitney U test on the runs: 'helped' or 'hurt' only when it
separates them (p < 0.05), else 'no measurable difference', or 'too few runs' below three
runs a side.
"""

from __future__ import annotations

import math

import pandas as pd
from scipy.stats import mannwhitneyu

from mlflow_dlaas.libraries.settings import LIBRARY_SETTINGS
from mlflow_dlaas.report.derived import PEAK_MEMORY
from mlflow_dlaas.report.separation import ALPHA, MIN_REPLICATES
from mlflow_dlaas.report.tables import ComparisonTable, setting_text
from mlflow_dlaas.runs.schema import TRAIN_TIME, WALL_TIME

TITLE = "Parallel libraries (training, against each framework's default)"
PROJECT_TITLE = "Parallel libraries (your project, against its default)"
#: (heading, metric key, scale into the heading's unit, digits)
Measure = tuple[str, str, float, int]
MEASURES: tuple[Measure, ...] = (("train time (s)", TRAIN_TIME, 1.0, 2),
                                 ("peak memory (MB)", PEAK_MEMORY, 1.0, 0))
#: A user's project: its whole command's wall time (what mlflow-dlaas can time from outside).
PROJECT_MEASURES: tuple[Measure, ...] = (("wall time (s)", WALL_TIME, 1.0, 2),
                                         ("peak memory (MB)", PEAK_MEMORY, 1.0, 0))
DEFAULTS = ("", "default")


def libraries_table(train: pd.DataFrame, measures: tuple[Measure, ...] = MEASURES,
                    title: str = TITLE) -> ComparisonTable | None:
    """The table over ``train`` (training runs, or a project's), or None where no run
    changed a library setting."""
    columns = [f"params.{s}" for s in LIBRARY_SETTINGS if f"params.{s}" in train]
    if train.empty or not columns:
        return None
    headings = ["system", "setting", "value", "runs", "default runs"]
    for heading, *_ in measures:
        short = heading.split(" (")[0]
        headings += [heading, f"{short} vs default", f"{short} verdict"]
    cells, hints, stats = [], [], []
    for system, runs in train.groupby("system", sort=True):
        for column in columns:
            values = runs[column].fillna("").astype(str)
            base = runs[values.isin(DEFAULTS)]
            for value in sorted(set(values) - set(DEFAULTS)):
                row, hint, numbers = _row(str(system), column, value, runs[values == value],
                                          base, measures)
                cells.append(row)
                hints.append(hint)
                stats.append(numbers)
    if not cells:
        return None
    missing = [] if all(stats_row["default runs"] for stats_row in stats) else [
        "some settings have no run of their framework at the default to compare with"]
    return ComparisonTable(title, headings, cells, hints, pd.DataFrame(stats), missing)


def _row(system: str, column: str, value: str, chosen: pd.DataFrame, base: pd.DataFrame,
         measures: tuple[Measure, ...]) -> tuple[list[str], list[str], dict[str, object]]:
    setting = column.removeprefix("params.")
    cells = [system, setting, setting_text(value), str(len(chosen)), str(len(base))]
    hints = ["", "", "", "", ""]
    numbers: dict[str, object] = {"system": system, "setting": setting, "value": value,
                                  "runs": len(chosen), "run_ids": list(chosen["run_id"]),
                                  "default runs": len(base),
                                  "default_run_ids": ",".join(base["run_id"])}
    for _, metric, scale, digits in measures:
        key = f"metrics.{metric}"
        got = _values(chosen, key)
        ref = _values(base, key)
        ratio = _median(got) / _median(ref) if got and ref and _median(ref) else math.nan
        verdict = _effect_of_setting(got, ref)
        cells += [_spread(got, scale, digits), _ratio(ratio), verdict]
        hints += [f"default: {_spread(ref, scale, digits)}", "median / default median", ""]
        numbers.update({f"{metric}|median": _median(got) if got else math.nan,
                        f"{metric}|ratio": ratio, f"{metric}|verdict": verdict})
    return cells, hints, numbers


def _values(rows: pd.DataFrame, key: str) -> list[float]:
    if key not in rows:
        return []
    return [float(v) for v in pd.to_numeric(rows[key], errors="coerce").dropna()]


def _median(values: list[float]) -> float:
    return float(pd.Series(values).median())


def _spread(values: list[float], scale: float, digits: int) -> str:
    """``median [q1–q3]`` (one run: its value; none: —)."""
    if not values:
        return "—"
    series = pd.Series(values) * scale
    text = f"{series.median():,.{digits}f}"
    if len(values) > 1:
        text += f" [{series.quantile(0.25):,.{digits}f}–{series.quantile(0.75):,.{digits}f}]"
    return text


def _ratio(ratio: float) -> str:
    return "—" if math.isnan(ratio) else f"{ratio:.2f}x"


def _effect_of_setting(chosen: list[float], default: list[float]) -> str:
    """Lower is better for both measures (time, memory)."""
    if min(len(chosen), len(default)) < MIN_REPLICATES:
        return f"too few runs ({len(chosen)} vs {len(default)}; {MIN_REPLICATES} a side)"
    p = float(mannwhitneyu(chosen, default, alternative="two-sided").pvalue)
    if p >= ALPHA:
        return f"no measurable difference (p = {p:.2f})"
    return f"{'helped' if _median(chosen) < _median(default) else 'hurt'} (p = {p:.3f})"
