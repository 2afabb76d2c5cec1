"""The report's table of a user's own project: the metrics its code logged, beside what
mlflow-dlaas measured from outside, per configuration of its parameters and our settings."""

from __future__ import annotations

import pandas as pd

from mlflow_dlaas.report.derived import ENERGY, PEAK_MEMORY
from mlflow_dlaas.report.tables import Column, ComparisonTable, comparison_table
from mlflow_dlaas.runs.schema import (
    EXIT_CODE,
    KERNEL_CPU_TIME,
    KERNEL_MAX_RSS,
    RUN_CPU_TIME,
    WALL_TIME,
)

TITLE = "Project runs (your code's own metrics; time, memory and CPU measured from outside)"
MEASURED = (
    Column("wall time (s)", WALL_TIME),
    Column("peak memory (MB)", PEAK_MEMORY),
    Column("CPU, whole run (s)", RUN_CPU_TIME),
    Column("energy, whole run (J)", ENERGY),
)
#: Of the metrics a project's run holds, those mlflow-dlaas logs (the rest are the user's).
OURS = frozenset({WALL_TIME, EXIT_CODE, KERNEL_CPU_TIME, KERNEL_MAX_RSS})
#: At most this many of the user's own metrics, in name order.
MAX_OWN_METRICS = 6


def own_metrics(runs: pd.DataFrame) -> list[str]:
    """The metric keys the user's code logged: no section (``/``) and not one of ours."""
    keys = [c.removeprefix("metrics.") for c in runs.columns if c.startswith("metrics.")
            and runs[c].notna().any()]
    return sorted(k for k in keys if "/" not in k and k not in OURS)[:MAX_OWN_METRICS]


def project_table(runs: pd.DataFrame) -> ComparisonTable | None:
    """The table, or None where no run measured a user's project."""
    if runs.empty:
        return None
    own = tuple(Column(key, key) for key in own_metrics(runs))
    return comparison_table(TITLE, runs, (*own, *MEASURED))
