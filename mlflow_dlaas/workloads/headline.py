"""A run's headline figures as a person reads them: labelled, in reading order, three
significant digits with their unit."""

from __future__ import annotations

from collections.abc import Mapping

from mlflow_dlaas.figures import significant
from mlflow_dlaas.runs.schema import LABELS


def headline_text(metrics: Mapping[str, float]) -> dict[str, str]:
    """The run's headline figures, labelled and formatted, in reading order."""
    return {label: f"{significant(metrics[key])} {unit}".rstrip()
            for key, (label, unit) in LABELS.items() if key in metrics}
