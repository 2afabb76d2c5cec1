"""Tables that set each value of one setting against a baseline value, like for like: the
parallel libraries against each framework's default, a precision against fp32.

A value's runs are set against the baseline's only where both ran with everything else
equal (:func:`mlflow_dlaas.report.comparable.match`: the workload, the other settings, the
hyper-parameters): one cell per such combination. Where several settings varied, the
comparison pools over the cells where both sides ran, relabelling within cells only (a
stratified test), and the row names what it held and what it pooled over. Runs with no
counterpart are counted apart and never pooled. Each verdict is the effect's ratio with its
95 % interval (:mod:`mlflow_dlaas.report.effect`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from mlflow_dlaas.figures import significant
from mlflow_dlaas.report.comparable import Matching, by_workload, match
from mlflow_dlaas.report.failures import FailureCount, failed_like, reason_of
from mlflow_dlaas.report.formatting import setting_text
from mlflow_dlaas.report.tables import ComparisonTable


@dataclass(frozen=True)
class Measure:
    """One compared figure: heading with its unit, metric key, which way is better.
    ``judged=False``: a figure that is already relative to the baseline (agreement with
    the fp32 reference): shown, not tested against it."""

    heading: str
    metric: str
    lower_is_better: bool = True
    judged: bool = True

    @property
    def name(self) -> str:
        """The heading without its unit: ``train time``."""
        return self.heading.split(" (")[0]


@dataclass(frozen=True)
class Comparison:
    """What one table compares: the settings, their baseline values and its name, the
    figures, and the info columns each row keeps apart (``batch_size``)."""

    title: str
    columns: tuple[str, ...]  # params.X, each compared on its own
    baselines: tuple[str, ...]  # the values that are the baseline ('' for unset)
    baseline_name: str  # "default", "fp32"
    measures: tuple[Measure, ...]
    apart: tuple[str, ...] = ()
    show_baseline: bool = False  # a column with the baseline's own figure


def against_baseline(rows: pd.DataFrame, comparison: Comparison,
                     failed: pd.DataFrame | None = None) -> ComparisonTable | None:
    """The table over ``rows``, or None where no run left the baseline; ``failed``: runs
    that FAILED, counted beside each side's (a column, where any row has one)."""
    columns = [c for c in comparison.columns if c in rows]
    if rows.empty or not columns:
        return None
    workloads = by_workload(rows)
    apart = [c for c in comparison.apart if c in rows]
    headings = [*(["workload"] if len(workloads) > 1 else []), "system", *apart, "setting",
                "value", f"runs vs {comparison.baseline_name} runs", "held fixed",
                "pooled over"]
    for measure in comparison.measures:
        headings.append(measure.heading)
        if measure.judged and comparison.show_baseline:
            headings.append(f"{measure.name} at {comparison.baseline_name}")
        if measure.judged:
            headings.append(f"{measure.name} vs {comparison.baseline_name}")
    cells, hints, stats, lost_cells = [], [], [], []
    for workload in workloads:
        lost = failed_like(workload.rows, failed if failed is not None else rows.iloc[0:0])
        for key, runs in workload.rows.groupby(["system", *apart], sort=True):
            group = [str(g) for g in (key if isinstance(key, tuple) else (key,))]
            for column in columns:
                values = runs[column].fillna("").astype(str)
                for value in sorted(set(values) - set(comparison.baselines)):
                    matching = match(runs, column, [value], comparison.baselines)
                    row, hint, numbers = _row(comparison, group, apart, column, value,
                                              matching)
                    prefix = [workload.label] if len(workloads) > 1 else []
                    cells.append(prefix + row)
                    hints.append([""] * len(prefix) + hint)
                    lost_cells.append(_lost(lost, group[0], column, value, comparison,
                                            matching))
                    stats.append({"workload": workload.label, **numbers,
                                  "failed_runs": lost_cells[-1]})
    if not cells:
        return None
    if any(lost_cells):  # after the counts: how many runs each side lost as failed
        at = headings.index(f"runs vs {comparison.baseline_name} runs") + 1
        headings.insert(at, "failed runs")
        for row, hint, lost_text in zip(cells, hints, lost_cells, strict=True):
            row.insert(at, lost_text or "none")
            hint.insert(at, "runs of this configuration that FAILED, counted beside the "
                            "finished ones; the reason is their most frequent")
    return ComparisonTable(comparison.title, headings, cells, hints, pd.DataFrame(stats),
                           _notes(pd.DataFrame(stats), comparison.baseline_name))


def _lost(failed: pd.DataFrame, system: str, column: str, value: str,
          comparison: Comparison, matching: Matching) -> str:
    """``int8: failed in 1 of 2 runs (top-1 agreement 0.625 < 0.75)``, and the baseline's
    likewise, for the runs of ``system`` that FAILED; '' where neither side lost one."""
    if failed.empty or column not in failed:
        return ""
    mine = failed[failed["system"] == system] if "system" in failed else failed
    values = mine[column].fillna("").astype(str)
    parts = []
    for label, side, finished in (
            (setting_text(value), mine[values == value], len(set(matching.chosen_ids))),
            (comparison.baseline_name, mine[values.isin(comparison.baselines)],
             len(set(matching.baseline_ids)))):
        if len(side):
            count = FailureCount(len(side), len(side) + finished, reason_of(side))
            parts.append(f"{label}: {count.text()}")
    return "; ".join(parts)


def _row(comparison: Comparison, group: list[str], apart: list[str], column: str, value: str,
         matching: Matching) -> tuple[list[str], list[str], dict[str, object]]:
    setting = column.removeprefix("params.")
    base = comparison.baseline_name
    chosen, baseline = matching.chosen_ids, matching.baseline_ids
    lone = len(matching.unmatched_chosen) + len(matching.unmatched_baseline)
    count = f"{len(chosen)} vs {len(baseline)}"
    if not matching.cells:
        count = f"no counterpart ({len(matching.unmatched_chosen)} runs)"
    cells = [*group, setting, setting_text(value), count,
             ", ".join(matching.held()) or "—", ", ".join(matching.pooled()) or "nothing"]
    hints = [""] * (len(group) + 2) + [
        f"{lone} runs without a counterpart left out" if lone else "", "", ""]
    numbers: dict[str, object] = {
        "system": group[0], **dict(zip(apart, group[1:], strict=True)),
        "setting": setting, "value": value, "runs": len(chosen), "run_ids": chosen,
        f"{base} runs": len(baseline), f"{base}_run_ids": baseline,
        "cells": len(matching.cells), "held": "; ".join(matching.held()),
        "pooled_over": "; ".join(matching.pooled()),
        "unmatched_run_ids": list(matching.unmatched_chosen),
        f"unmatched_{base}_run_ids": list(matching.unmatched_baseline)}
    for measure in comparison.measures:
        key = f"metrics.{measure.metric}"
        got = [v for c in matching.cells for v in _values(c.chosen, key)]
        cells.append(_spread(got))
        hints.append(f"{measure.heading}: median [interquartile range] of the matched runs")
        numbers[f"{measure.metric}|median"] = _median(got)
        if not measure.judged:
            continue
        if comparison.show_baseline:
            cells.append(_spread([v for c in matching.cells for v in _values(c.baseline, key)]))
            hints.append(f"{measure.heading} of the {base} runs they are matched with")
        if not matching.cells:
            cells.append(f"no {base} run equal in everything else: not compared")
            hints.append("")
            numbers[f"{measure.metric}|verdict"] = "no counterpart"
            continue
        effect = matching.effect(key, lower_is_better=measure.lower_is_better)
        cells.append(effect.words())
        hints.append(effect.test_text())
        numbers.update({f"{measure.metric}|ratio": effect.ratio,
                        f"{measure.metric}|ci_low": effect.low,
                        f"{measure.metric}|ci_high": effect.high,
                        f"{measure.metric}|p": effect.p_value,
                        f"{measure.metric}|verdict": effect.verdict.value,
                        f"{measure.metric}|test": effect.test_text()})
    return cells, hints, numbers


def _notes(stats: pd.DataFrame, baseline_name: str) -> list[str]:
    lone = stats[stats["cells"] == 0]
    if not len(lone):
        return []
    return [f"{len(lone)} settings have no {baseline_name} run of their system with "
            f"everything else equal: run the {baseline_name} beside them (same workload, "
            "threads, other settings) to compare them"]


def _values(rows: pd.DataFrame, key: str) -> list[float]:
    if key not in rows:
        return []
    return [float(v) for v in pd.to_numeric(rows[key], errors="coerce").dropna()]


def _median(values: Sequence[float]) -> float:
    return float(pd.Series(list(values), dtype=float).median())


def _spread(values: Sequence[float]) -> str:
    """``median [q1–q3]`` at three significant digits (one run: its value; none: —)."""
    if not values:
        return "—"
    series = pd.Series(list(values), dtype=float)
    text = significant(series.median())
    if len(values) > 1:
        text += f" [{significant(series.quantile(0.25))}–{significant(series.quantile(0.75))}]"
    return text
