"""Training plots: time-to-accuracy curves, accuracy against train time, and the fraction of
the machine's peak each framework reaches."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from mlflow import MlflowClient

from mlflow_dlaas.report.plots import Plot, colours, draw, missing, pareto_front
from mlflow_dlaas.runs.schema import (
    CUMULATIVE_TRAIN_TIME,
    EPOCH_TEST_ACCURACY,
    FRACTION_OF_PEAK,
    TEST_ACCURACY,
    TRAIN_TIME,
)

CURVES_PER_SYSTEM = 3


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
    """Every finished training run; the Pareto front (faster and more accurate) drawn."""
    name, title = "accuracy_vs_train_time", "Accuracy vs train time"
    needed = [f"metrics.{TEST_ACCURACY}", f"metrics.{TRAIN_TIME}"]
    if train.empty or any(c not in train for c in needed):
        return missing(name, title, "no finished training run logged both "
                       f"{TEST_ACCURACY} and {TRAIN_TIME}")
    data = train.dropna(subset=needed)
    if data.empty:
        return missing(name, title, "no finished training run logged both "
                       f"{TEST_ACCURACY} and {TRAIN_TIME}")
    points = list(zip(data[needed[1]], data[needed[0]], strict=True))
    front = pareto_front(points)
    palette = colours(data["system"])

    def paint(figure: Figure) -> None:
        ax = figure.add_subplot()
        for system, group in data.groupby("system"):
            ax.scatter(group[needed[1]], group[needed[0]], color=palette[system], label=system,
                       alpha=0.75)
        xs, ys = zip(*front, strict=True)
        ax.plot(xs, ys, color="black", linestyle="--", marker="*", markersize=12,
                markerfacecolor="none", label="Pareto front")
        ax.set_xlabel("train time (s)")
        ax.set_ylabel("final test accuracy")
        ax.grid(alpha=0.3)
        ax.legend()

    return draw(name, title, f"{len(data)} runs; {len(front)} on the Pareto front.", paint)


def fraction_of_peak(train: pd.DataFrame) -> Plot:
    """Median fraction of the CPU's FP32 peak in the train phase, per framework, by model and
    batch size: which framework leaves the hardware idle."""
    name, title = "fraction_of_peak", "Fraction of the CPU's peak (training)"
    key = f"metrics.{FRACTION_OF_PEAK}"
    data = train.dropna(subset=[key]) if key in train else train.iloc[0:0]
    if data.empty:
        return missing(name, title, f"no training run logged {FRACTION_OF_PEAK} (a CPU run "
                       "whose peak could be derived; tag dlaas.peak says why not)")
    workload = (data.get("params.model", pd.Series("?", index=data.index)).astype(str)
                + " bs " + data.get("params.batch_size",
                                    pd.Series("?", index=data.index)).astype(str))
    medians = (data.assign(workload=workload).groupby(["workload", "system"])[key].median()
               .unstack("system"))
    palette = colours(list(medians.columns))

    def paint(figure: Figure) -> None:
        ax = figure.add_subplot()
        width = 0.8 / len(medians.columns)
        for i, system in enumerate(medians.columns):
            xs = [x + i * width for x in range(len(medians))]
            ax.bar(xs, medians[system], width, color=palette[system], label=system)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(medians))], medians.index)
        ax.set_ylabel("fraction of FP32 peak (train phase)")
        ax.set_ylim(0, max(1.0, float(medians.max().max()) * 1.1))
        ax.grid(axis="y", alpha=0.3)
        ax.legend()

    return draw(name, title, "Median per framework of training FLOPs per second (the "
                "model's count, equal on every framework) over the cores in use x clock x "
                "FP32 FLOPs per cycle; how each peak was derived is the run's dlaas.peak tag.",
                paint)
