"""Which questions a report asks, and of which runs: each study's own objectives over that
study's runs, then the user's, then the standing questions no one asked yet. Accuracy
between settings that cannot change what is computed (threads, parallel libraries) is a
check, never a recommendation: there its differences are the seed's."""

from __future__ import annotations

from dataclasses import dataclass, fields

import pandas as pd

from mlflow_dlaas.figures import significant
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.report.aggregate import aggregate, shown_settings
from mlflow_dlaas.report.comparable import Workload, by_workload
from mlflow_dlaas.runs.goals import Bound, Goal

Ask = tuple[Goal, tuple[Bound, ...]]
#: settings that choose how the same arithmetic is scheduled, never what it computes
ACCURACY_NEUTRAL = frozenset(f"params.{f.name}" for f in fields(ParallelismSettings))
#: median accuracies further apart than this between such settings are worth a look
ACCURACY_TOLERANCE = 0.01


@dataclass(frozen=True)
class Question:
    """One objective (with its bounds) and whose runs it is asked of."""

    goal: Goal
    bounds: tuple[Bound, ...] = ()
    study: str = ""  # ask it of this study's runs only; '' for every run in the report
    #: studies whose runs it is not asked of (they asked it themselves)
    apart: tuple[str, ...] = ()

    def rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The runs this question is asked of."""
        studies = rows["study"] if "study" in rows else pd.Series("", index=rows.index)
        if self.study:
            return rows[studies == self.study]
        return rows[~studies.isin(self.apart)] if self.apart else rows

    def label(self, workload: str) -> str:
        """Where its answers are shown: ``study demo-threads · train · lenet5 ...``."""
        where = f"study {self.study}" if self.study else ""
        return " · ".join(p for p in (where, workload) if p)


def questions(study_asks: dict[str, list[Ask]], asked: list[Ask], standing: list[Ask]
              ) -> list[Question]:
    """Each study's objectives over its runs, the user's ``asked`` over every run, then the
    ``standing`` ones no user asked about, over the runs of the studies that did not ask
    them either (each run is asked each question once)."""
    found = [Question(goal, bounds, study) for study, asks in sorted(study_asks.items())
             for goal, bounds in asks]
    found += [Question(goal, bounds) for goal, bounds in asked]
    users = {goal.metric for goal, _ in asked}
    return found + [
        Question(goal, bounds, apart=tuple(sorted(
            study for study, asks in study_asks.items()
            if any(g.metric == goal.metric for g, _ in asks))))
        for goal, bounds in standing if goal.metric not in users]


def is_accuracy(goal: Goal) -> bool:
    """An accuracy objective (not a time to reach one)."""
    return "accuracy" in goal.metric and "time" not in goal.metric


def accuracy_checks(goal: Goal, rows: pd.DataFrame) -> tuple[list[Workload], list[str]]:
    """``rows``' workloads split in two: those whose configurations differ in something
    that may change accuracy (asked as a question), and a check line for each of the
    others, whose configurations differ only in :data:`ACCURACY_NEUTRAL` settings."""
    workloads = by_workload(rows) or [Workload("", rows)]
    asked, checks = [], []
    for workload in workloads:
        key = f"metrics.{goal.metric}"
        stats = aggregate(workload.rows, [key])
        varying = [c for c in shown_settings(stats) if stats[c].astype(str).nunique() > 1]
        if len(stats) < 2 or not varying or not set(varying) <= ACCURACY_NEUTRAL:
            asked.append(workload)
            continue
        checks.append(_check_line(workload.label, varying, stats[f"{key}|median"].dropna()))
    return asked, checks


def _check_line(workload: str, varying: list[str], medians: pd.Series) -> str:
    """``accuracy check (train · lenet5 ...): intra_op_threads, allocator do not change
    what is computed; the 4 configurations' median accuracies lie within 0.884–0.890``."""
    names = ", ".join(c.removeprefix("params.") for c in varying)
    where = f" ({workload})" if workload else ""
    low, high = float(medians.min()), float(medians.max())
    line = (f"accuracy check{where}: {names} do not change what is computed, so accuracy "
            f"is not a choice between them; the {len(medians)} configurations' median "
            f"accuracies lie within {significant(low)}–{significant(high)}")
    if high - low > ACCURACY_TOLERANCE:
        line += (f", more than {ACCURACY_TOLERANCE:g} apart: look at their runs, which "
                 "should have computed the same")
    return line
