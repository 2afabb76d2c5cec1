"""Replicates (runs that differ only in their seed) folded into one row of statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlflow_dlaas.report.comparable import configuration_columns

#: params that only restate the system or the served model (its ``model``, ``run-1a2b3c4d``,
#: names the training run): never shown as settings
NOT_SHOWN = ("params.framework", "params.runtime", "params.reference_framework",
             "params.architecture")
STATS = ("median", "q1", "q3", "mean", "gmean", "sd", "n")


def shown_settings(stats: pd.DataFrame) -> list[str]:
    """System, batch size, and every other configuration column (host, params) that differs
    between rows."""
    return [c for c in configuration_columns(stats)
            if c in ("system", "batch_size")
            or (c not in NOT_SHOWN and not c.startswith("params.in_force_")
                and stats[c].nunique(dropna=False) > 1 and not _restated(stats, c))]


def _restated(stats: pd.DataFrame, column: str) -> bool:
    """A served training run's URI: its ``model`` (``run-1a2b3c4d``) says it."""
    if column != "params.model_uri" or "params.model" not in stats \
            or "model_source" not in stats:
        return False
    return bool(stats["model_source"].eq("training_run").all())


def configuration_ids(rows: pd.DataFrame) -> pd.Series:
    """A label per row, equal for replicates of one configuration."""
    columns = configuration_columns(rows)
    if rows.empty:
        return pd.Series([], dtype=str, index=rows.index)
    settings = rows[columns].astype(object)
    keyed = settings.where(settings.notna(), "").astype(str).agg("\x1f".join, axis=1)
    codes, _ = pd.factorize(keyed)
    return pd.Series([f"c{c}" for c in codes], index=rows.index)


def aggregate(rows: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """One row per configuration: its settings, ``run_ids`` and ``{metric}|{stat}`` columns.

    Stats: median, q1 and q3 (the IQR), mean, gmean (the geometric mean of the positive
    values: the statistic answers rank and compare by), sd (ddof 1; 0 for one run) and n
    (runs that logged the metric). ``metrics`` are column names such as
    ``metrics.train_time_seconds``; absent ones give NaN statistics with n = 0.
    """
    if rows.empty:
        return pd.DataFrame(columns=["config", "runs", "run_ids"])
    rows = rows.assign(config=configuration_ids(rows))
    grouped = rows.groupby("config", sort=False)
    read_back = [c for c in rows.columns if c.startswith("params.in_force_")
                 or c == "model_source"]
    settings = grouped[configuration_columns(rows) + read_back].first()  # shown beside them
    out = settings.assign(runs=grouped.size(), run_ids=grouped["run_id"].agg(list))
    stats = {}
    for metric in metrics:
        values = (rows[metric] if metric in rows else pd.Series(np.nan, index=rows.index))
        values = pd.to_numeric(values, errors="coerce").groupby(rows["config"], sort=False)
        stats[f"{metric}|median"] = values.median()
        stats[f"{metric}|q1"] = values.quantile(0.25)
        stats[f"{metric}|q3"] = values.quantile(0.75)
        stats[f"{metric}|mean"] = values.mean()
        stats[f"{metric}|gmean"] = values.agg(geometric_mean)
        stats[f"{metric}|sd"] = values.std(ddof=1).fillna(0.0).where(values.count() > 0)
        stats[f"{metric}|n"] = values.count()
    return pd.concat([out, pd.DataFrame(stats)], axis=1).reset_index()


def geometric_mean(values: pd.Series) -> float:
    """exp(mean(log v)) over the positive values (NaN where there are none): the ratio of
    two of them is the ratio every comparison (:mod:`~mlflow_dlaas.report.effect`) tests."""
    positive = values[values > 0].to_numpy(dtype=float)
    return float(np.exp(np.log(positive).mean())) if len(positive) else float("nan")
