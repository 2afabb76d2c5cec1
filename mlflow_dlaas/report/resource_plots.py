"""Resource plots: timelines per phase, settings-vs-resource correlations, energy."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from mlflow_dlaas.monitor.timeline_plot import paint_timeline
from mlflow_dlaas.report.derived import ENERGY, ENERGY_PER_1000, PEAK_MEMORY
from mlflow_dlaas.report.plots import Plot, colours, draw, missing
from mlflow_dlaas.runs import schema

TIMELINE_RUNS = 6
MIN_PAIRS = 3  # fewer runs measured with both values: no correlation shown
OUTCOMES = {
    f"metrics.{schema.TRAIN_TIME}": "train time", f"metrics.{schema.TEST_ACCURACY}": "accuracy",
    f"metrics.{PEAK_MEMORY}": "peak memory", f"metrics.{schema.CPU_TIME}": "CPU s (measured)",
    f"metrics.{schema.RUN_CPU_TIME}": "CPU seconds", f"metrics.{ENERGY}": "energy",
    f"metrics.{schema.INFERENCE_THROUGHPUT}": "throughput",
    f"metrics.{schema.P99_LATENCY}": "p99 latency",
}


def timelines(client: MlflowClient, runs: pd.DataFrame) -> Plot:
    """Process-tree CPU and RSS over time, phases shaded: the latest run of each system."""
    name, title = "resource_timelines", "Resource timelines per phase"
    if runs.empty:
        return missing(name, title, "no finished runs")
    latest = runs.sort_values("start_time", ascending=False).groupby(
        ["entry", "system"]).head(1).head(TIMELINE_RUNS)
    loaded = [(row, *_timeline(client, row["run_id"])) for _, row in latest.iterrows()]
    loaded = [item for item in loaded if item[1] is not None]
    if not loaded:
        return missing(name, title, "no run has the monitor/timeline.csv artifact")

    def paint(figure: Figure) -> None:
        for i, (row, samples, phases) in enumerate(loaded):
            ax = figure.add_subplot(len(loaded), 1, i + 1)
            unknown = pd.Series(np.nan, index=samples.index)  # a run too short to have a rate
            paint_timeline(ax, samples["t_s"], samples.get(schema.PROC_CPU_PERCENT, unknown),
                           samples.get(schema.PROC_RSS, unknown), phases)
            ax.set_title(f"{row['entry']} · {row['system']} · {row['run_name']}", fontsize=9)
        figure.axes[-2].set_xlabel("seconds since the monitor started")

    return draw(name, title, "The most recent run of each framework / runtime; blue: process-"
                "tree CPU (100 = one core), red: resident memory.", paint,
                size=(9, 2.3 * len(loaded) + 0.5))


def _timeline(client: MlflowClient, run_id: str
              ) -> tuple[pd.DataFrame | None, list[dict[str, float]]]:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            csv_path = client.download_artifacts(run_id, "monitor/timeline.csv", tmp)
            summary = client.download_artifacts(run_id, "monitor/summary.json", tmp)
        except (MlflowException, OSError):
            return None, []
        return pd.read_csv(csv_path), json.loads(Path(summary).read_text()).get("phases", [])


def correlation_heatmap(runs: pd.DataFrame) -> Plot:
    """Spearman correlation between numeric settings that vary and resource use / outcomes.

    Pairwise: each cell uses the runs that have both values (a training setting against
    training time, an inference setting against latency).
    """
    name, title = "settings_correlation", "Settings vs resource use (Spearman)"
    settings = {}
    for column in (c for c in runs.columns if c.startswith("params.") and c != "params.seed"):
        values = pd.to_numeric(runs[column], errors="coerce")  # unset ("") is not a number
        if values.notna().sum() >= 3 and values.nunique() > 1:
            settings[column.removeprefix("params.")] = values
    outcomes = {label: pd.to_numeric(runs[key], errors="coerce")
                for key, label in OUTCOMES.items()
                if key in runs and runs[key].notna().sum() >= 3 and runs[key].nunique() > 1}
    if len(runs) < 3 or not settings or not outcomes:
        return missing(name, title, "needs at least 3 runs with a numeric setting that varies "
                       "(threads, batch size, learning rate ...) and resource metrics")
    settings, confounded = _independent(settings)
    frame = pd.DataFrame({**settings, **outcomes})
    matrix = frame.corr(method="spearman", min_periods=MIN_PAIRS)
    matrix = matrix.loc[list(settings), list(outcomes)]
    confounds = ("; settings that never varied apart (their effects cannot be told apart) "
                 "are one row: " + "; ".join(" = ".join(group) for group in confounded)
                 ) if confounded else ""

    def paint(figure: Figure) -> None:
        ax = figure.add_subplot()
        image = ax.imshow(matrix.values, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        ax.set_xticks(range(len(matrix.columns)), matrix.columns, rotation=30, ha="right")
        ax.set_yticks(range(len(matrix.index)), matrix.index)
        for (i, j), value in np.ndenumerate(matrix.values):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8)
        figure.colorbar(image, ax=ax, label="Spearman rho")

    return draw(name, title, f"{len(runs)} finished runs; blank cells: a pair measured "
                f"together in fewer than {MIN_PAIRS} runs{confounds}.", paint,
                size=(8, 2.7 + 0.5 * len(matrix.index)))


def _independent(settings: dict[str, pd.Series]
                 ) -> tuple[dict[str, pd.Series], list[tuple[str, ...]]]:
    """The settings with those that never varied apart (rank-correlated +-1 over every run
    that has both) merged into one row named ``a = b``, and those groups."""
    names = list(settings)
    ranks = pd.DataFrame(settings).corr(method="spearman", min_periods=MIN_PAIRS)
    groups: list[list[str]] = []
    for name in names:
        group = next((g for g in groups if abs(ranks.loc[g[0], name]) > 1 - 1e-9), None)
        if group is None:
            groups.append([name])
        else:
            group.append(name)
    merged = {" = ".join(g): settings[g[0]] for g in groups}
    return merged, [tuple(g) for g in groups if len(g) > 1]


def energy_vs_throughput(train: pd.DataFrame, inference: pd.DataFrame) -> Plot:
    """Energy per sample against throughput, training and inference side by side."""
    name, title = "energy_vs_throughput", "Energy vs throughput"
    panels = []
    for rows, x, y, label in (
            (train, f"metrics.{schema.TRAIN_THROUGHPUT}", f"metrics.{ENERGY}",
             "training: energy of the run (J)"),
            (inference, f"metrics.{schema.INFERENCE_THROUGHPUT}",
             f"metrics.{ENERGY_PER_1000}", "inference: energy per 1,000 predictions (J)")):
        if x in rows and y in rows:
            data = pd.DataFrame({"system": rows["system"],
                                 x: pd.to_numeric(rows[x], errors="coerce"),
                                 y: pd.to_numeric(rows[y], errors="coerce")}).dropna()
            if len(data):
                panels.append((data, x, y, label))
    if not panels:
        return missing(name, title, "no run measured energy (no readable RAPL counter or "
                       "NVIDIA GPU where the runs ran)")
    palette = colours(pd.concat([p[0]["system"] for p in panels]))

    def paint(figure: Figure) -> None:
        for i, (data, x, y, label) in enumerate(panels):
            ax = figure.add_subplot(1, len(panels), i + 1)
            for system, group in data.groupby("system"):
                ax.scatter(group[x], group[y], color=palette[system], label=system)
            ax.set_xlabel("throughput (samples/s)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)

    return draw(name, title, "Each point one run (inference: one batch size of a run).",
                paint, size=(5 * len(panels), 4.2))
