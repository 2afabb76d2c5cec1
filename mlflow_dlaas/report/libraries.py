"""The report's "parallel libraries" table: per workload and framework, each library
setting's training time and peak memory against the framework's default, like for like
(:mod:`mlflow_dlaas.report.against_baseline`)."""

from __future__ import annotations

import pandas as pd

from mlflow_dlaas.libraries.settings import LIBRARY_SETTINGS
from mlflow_dlaas.report.against_baseline import Comparison, Measure, against_baseline
from mlflow_dlaas.report.derived import PEAK_MEMORY
from mlflow_dlaas.report.tables import ComparisonTable
from mlflow_dlaas.runs.schema import TRAIN_TIME, WALL_TIME

TITLE = "Parallel libraries (training, against each framework's default, like for like)"
PROJECT_TITLE = "Parallel libraries (your project, against its default, like for like)"
MEASURES = (Measure("train time (s)", TRAIN_TIME), Measure("peak memory (MB)", PEAK_MEMORY))
#: A user's project: its whole command's wall time (what mlflow-dlaas can time from outside).
PROJECT_MEASURES = (Measure("wall time (s)", WALL_TIME),
                    Measure("peak memory (MB)", PEAK_MEMORY))
DEFAULTS = ("", "default")


def libraries_table(train: pd.DataFrame, measures: tuple[Measure, ...] = MEASURES,
                    title: str = TITLE, failed: pd.DataFrame | None = None
                    ) -> ComparisonTable | None:
    """The table over ``train`` (training runs, or a project's), or None where no run
    changed a library setting; ``failed`` runs are counted beside each row's."""
    columns = tuple(f"params.{s}" for s in LIBRARY_SETTINGS)
    return against_baseline(train, Comparison(title, columns, DEFAULTS, "default", measures),
                            failed)
