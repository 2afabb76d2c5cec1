"""Each inference run on the roofline of the machine it ran on: per offline batch size, the
arithmetic intensity (the model's FLOPs per sample over the bytes a sample moves: every
layer's output written and read once, and the weights read once per batch) against the
GFLOP/s achieved, under both measured ceilings (compute at the run's precision, and memory
bandwidth times intensity)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from mlflow_dlaas.report.plots import Plot, colours, draw, missing
from mlflow_dlaas.runs.schema import (
    ACTIVATION_BYTES,
    FORWARD_FLOPS,
    MEMORY_BANDWIDTH,
    PEAK_GFLOPS,
    THROUGHPUT,
    WEIGHT_BYTES,
)

OFFLINE_THROUGHPUT = re.compile(rf"metrics\.offline/batch_(\d+)/{THROUGHPUT}")
NEEDED = tuple(f"metrics.{k}" for k in (FORWARD_FLOPS, ACTIVATION_BYTES, WEIGHT_BYTES,
                                        PEAK_GFLOPS, MEMORY_BANDWIDTH))


def roofline_points(inference: pd.DataFrame) -> pd.DataFrame:
    """(system, batch, intensity in FLOPs/byte, achieved GFLOP/s, peak, bandwidth) per run
    and offline batch size, for the runs that logged what the roofline needs."""
    flops, activations, weights, peak, bandwidth = NEEDED
    rows = []
    if not inference.empty and set(NEEDED) <= set(inference.columns):
        for column in inference.columns:
            found = OFFLINE_THROUGHPUT.fullmatch(column)
            if not found:
                continue
            batch = int(found.group(1))
            data = inference.dropna(subset=[column, *NEEDED])
            rows.append(pd.DataFrame({
                "system": data["system"], "batch": batch,
                "intensity": data[flops] / (data[activations] + data[weights] / batch),
                "gflops": data[column] * data[flops] / 1e9,
                "peak": data[peak], "bandwidth": data[bandwidth]}))
    columns = ["system", "batch", "intensity", "gflops", "peak", "bandwidth"]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)


def roofline(inference: pd.DataFrame) -> Plot:
    name, title = "roofline", "Inference runs on the machine's roofline"
    points = roofline_points(inference)
    if points.empty:
        return missing(name, title, "no inference run logged its model's bytes per sample "
                       "and the measured ceilings (a CPU run of one of our models, offline "
                       "scenario)")
    palette = colours(sorted(set(points["system"])))
    peak, bandwidth = points["peak"].median(), points["bandwidth"].median()

    def paint(figure: Figure) -> None:
        ax = figure.subplots()
        low = min(points["intensity"].min() / 2, peak / bandwidth / 4)
        high = max(points["intensity"].max() * 2, peak / bandwidth * 4)
        x = np.geomspace(low, high, 200)
        ax.plot(x, np.minimum(peak, bandwidth * x), color="black", linewidth=1.2,
                label=f"roof: {peak:.0f} GFLOP/s, {bandwidth:.1f} GB/s")
        for system, group in points.groupby("system"):
            ax.scatter(group["intensity"], group["gflops"], s=14 + 6 * np.log2(group["batch"]),
                       color=palette[system], label=system, alpha=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
        ax.set_ylabel("achieved GFLOP/s (offline)")
        ax.legend(fontsize="small")

    return draw(name, title, "Each point is a run's offline batch size (larger marker: larger "
                "batch): its FLOPs per second against its FLOPs per byte moved (every layer's "
                "output written and read once per sample, the weights once per batch, fp32). "
                "The roof is the ceilings measured on this host (the median over the runs): "
                "the best matrix product at the run's precision, and a triad's memory "
                "bandwidth (one thread) times the intensity. A point far below the roof leaves "
                "the machine idle; one near the sloped part is bound by memory.", paint)
