"""Training plots: time-to-accuracy curves and accuracy against train time."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from mlflow import MlflowClient

from mlflow_dlaas.report.comparable import Workload, by_workload
from mlflow_dlaas.report.plots import Plot, colours, draw, missing, pareto_front
from mlflow_dlaas.runs.schema import (
    CUMULATIVE_TRAIN_TIME,
    EPOCH_TEST_ACCURACY,
    TEST_ACCURACY,
    TRAIN_TIME,
)

CURVES_PER_SYSTEM = 3
#: one marker per workload in a plot of several
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def time_to_accuracy_curves(client: MlflowClient, train: pd.DataFrame) -> Plot:
    """Test accuracy per epoch against cumulative train time, best runs of each framework."""
    name, title = "time_to_accuracy", "Time to accuracy"
    if f"metrics.{TEST_ACCURACY}" not in train or train.empty:
        return missing(name, title, f"no finished training run logged {TEST_ACCURACY}")
    best = (train.sort_values(f"metrics.{TEST_ACCURACY}", ascending=False)
            .groupby("system").head(CURVES_PER_SYSTEM))
    curves = []
    for _, run in best.iterrows():
        accuracy = client.get_metric_history(run["run_id"], EPOCH_TEST_ACCURACY)
        elapsed = {m.step: m.value for m in
                   client.get_metric_history(run["run_id"], CUMULATIVE_TRAIN_TIME)}
        points = sorted((elapsed[m.step], m.value) for m in accuracy if m.step in elapsed)
        if points:
            curves.append((run["system"], run["run_name"], points))
    if not curves:
        return missing(name, title, "no training run has per-epoch test_accuracy history")
    palette = colours([c[0] for c in curves])

    def paint(figure: Figure) -> None:
        ax = figure.add_subplot()
        seen: set[str] = set()
        for system, _, points in curves:
            xs, ys = zip(*points, strict=True)  # measured epochs only, no assumed origin
            ax.plot(xs, ys, marker="o", color=palette[system], alpha=0.8,
                    label=None if system in seen else system)
            seen.add(system)
        ax.set_xlabel("cumulative train time (s)")
        ax.set_ylabel("test accuracy")
        ax.grid(alpha=0.3)
        ax.legend()

    return draw(name, title, f"Up to {CURVES_PER_SYSTEM} most accurate runs per framework; "
                "one point per epoch.", paint)


def accuracy_vs_time(train: pd.DataFrame) -> Plot:
    """Every finished training run, a marker per workload (runs of another epoch count are
    another task); each workload's Pareto front (faster and more accurate) drawn."""
    name, title = "accuracy_vs_train_time", "Accuracy vs train time"
    needed = [f"metrics.{TEST_ACCURACY}", f"metrics.{TRAIN_TIME}"]
    if train.empty or any(c not in train for c in needed):
        return missing(name, title, "no finished training run logged both "
                       f"{TEST_ACCURACY} and {TRAIN_TIME}")
    data = train.dropna(subset=needed)
    if data.empty:
        return missing(name, title, "no finished training run logged both "
                       f"{TEST_ACCURACY} and {TRAIN_TIME}")
    workloads = by_workload(data) or [Workload("", data)]
    fronts = [pareto_front(list(zip(w.rows[needed[1]], w.rows[needed[0]], strict=True)))
              for w in workloads]
    palette = colours(data["system"])

    def paint(figure: Figure) -> None:
        ax = figure.add_subplot()
        for marker, workload, front in zip(MARKERS, workloads, fronts, strict=False):
            where = f" · {workload.label}" if len(workloads) > 1 else ""
            for system, group in workload.rows.groupby("system"):
                ax.scatter(group[needed[1]], group[needed[0]], color=palette[system],
                           marker=marker, label=f"{system}{where}", alpha=0.75)
            xs, ys = zip(*front, strict=True)
            ax.plot(xs, ys, color="black", linestyle="--", linewidth=0.8,
                    label=f"Pareto front{where}")
        ax.set_xlabel("train time (s)")
        ax.set_ylabel("final test accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")

    on_front = sum(len(f) for f in fronts)
    apart = (f"; a front per workload ({len(workloads)}: runs of different tasks are never "
             "on one front)" if len(workloads) > 1 else "")
    return draw(name, title, f"{len(data)} runs; {on_front} on the Pareto front{apart}.",
                paint)
