"""How much of the CPU's measured peak each framework and runtime reaches, by model and
batch size: the roofline-style question "which one leaves the hardware idle"."""

from __future__ import annotations

import re

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from mlflow_dlaas.report.plots import Plot, colours, draw, missing
from mlflow_dlaas.runs.schema import FORWARD_FLOPS, FRACTION_OF_PEAK, PEAK_GFLOPS, THROUGHPUT

OFFLINE_THROUGHPUT_COLUMN = re.compile(rf"metrics\.offline/batch_(\d+)/{THROUGHPUT}")


def training_fractions(train: pd.DataFrame) -> pd.DataFrame:
    """(workload, system, fraction) per training run: the train phase's fraction of peak."""
    key = f"metrics.{FRACTION_OF_PEAK}"
    if train.empty or key not in train:
        return pd.DataFrame(columns=["workload", "system", "fraction"])
    data = train.dropna(subset=[key])
    return pd.DataFrame({"workload": _label(data, data.get("params.batch_size")),
                         "system": data["system"], "fraction": data[key]})


def inference_fractions(inference: pd.DataFrame) -> pd.DataFrame:
    """(workload, system, fraction) per inference run and offline batch size: the batch
    size's throughput times the model's FLOPs per sample, over the run's peak. A run whose
    best rate exceeded its peak logged no fraction (its peak was measured low) and is left
    out."""
    peak, flops = f"metrics.{PEAK_GFLOPS}", f"metrics.{FORWARD_FLOPS}"
    fraction = f"metrics.{FRACTION_OF_PEAK}"
    rows = []
    if not inference.empty and {peak, flops, fraction} <= set(inference.columns):
        for column in inference.columns:
            found = OFFLINE_THROUGHPUT_COLUMN.fullmatch(column)
            if not found:
                continue
            data = inference.dropna(subset=[column, peak, flops, fraction])
            rows.append(pd.DataFrame({
                "workload": _label(data, pd.Series(found.group(1), index=data.index)),
                "system": data["system"],
                "fraction": data[column] * data[flops] / 1e9 / data[peak],
                "model": _architecture(data), "batch": int(found.group(1))}))
    if not rows:
        return pd.DataFrame(columns=["workload", "system", "fraction"])
    found_rows = pd.concat(rows).sort_values(["model", "batch"], kind="stable")
    return found_rows.drop(columns=["model", "batch"])


def _architecture(data: pd.DataFrame) -> pd.Series:
    """The model's architecture: an inference run of a trained model logs it as
    ``architecture`` (its ``model`` names the run it serves)."""
    model = data.get("params.model", pd.Series("?", index=data.index)).fillna("?").astype(str)
    if "params.architecture" in data:
        model = data["params.architecture"].fillna(model).astype(str)
    return model


def _label(data: pd.DataFrame, batch: pd.Series | None) -> pd.Series:
    """``lenet5 bs 8``: the architecture, then the batch size."""
    sizes = (batch if batch is not None else pd.Series("?", index=data.index)).astype(str)
    return _architecture(data) + " bs " + sizes


def fraction_of_peak(train: pd.DataFrame, inference: pd.DataFrame) -> Plot:
    """Median fraction of peak per framework / runtime: training runs' train phase, and
    inference runs' offline scenario per batch size."""
    name, title = "fraction_of_peak", "Fraction of the CPU's measured peak"
    panels = [(label, frame) for label, frame in
              (("training (train phase)", training_fractions(train)),
               ("inference (offline)", inference_fractions(inference))) if len(frame)]
    if not panels:
        return missing(name, title, f"no run logged {FRACTION_OF_PEAK} (a CPU run of one of "
                       "our models whose peak could be measured; tag dlaas.peak says why not)")
    palette = colours(sorted({s for _, f in panels for s in f["system"]}))

    def paint(figure: Figure) -> None:
        axes = figure.subplots(1, len(panels), squeeze=False)[0]
        for ax, (label, frame) in zip(axes, panels, strict=True):
            _bars(ax, frame, palette)
            ax.set_title(label)
        axes[0].set_ylabel("share of the measured peak")

    return draw(name, title, "Median per framework or runtime of the FLOPs per second achieved "
                "(the model definition's count, equal on every framework) over the ceiling "
                "measured on the cores in use at the run's precision (the best matrix product "
                "of PyTorch's and numpy's kernels); each run's dlaas.peak tag says which.",
                paint)


def _bars(ax: Axes, frame: pd.DataFrame, palette: dict[str, str]) -> None:
    order = list(dict.fromkeys(frame["workload"]))
    medians = frame.groupby(["workload", "system"])["fraction"].median().unstack("system")
    medians = medians.reindex(order)
    width = 0.8 / len(medians.columns)
    for i, system in enumerate(medians.columns):
        bars = ax.bar([x + i * width for x in range(len(medians))], medians[system], width,
                      color=palette[system], label=system)
        ax.bar_label(bars, fmt="{:.1%}", fontsize=8)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(medians))], medians.index,
                  rotation=30, ha="right")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylim(0, max(float(medians.max().max()) * 1.6, 0.01))  # small models: a few %
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, ncol=2)
