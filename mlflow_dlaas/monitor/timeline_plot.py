"""One run's resource timeline as a picture: process-tree CPU and RSS, phases shaded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.runs.schema import PROC_CPU_PERCENT, PROC_RSS

BYTES_PER_MB = 1e6  # as MLflow's system metrics count


def paint_timeline(ax: Any, t_s: Sequence[float], cpu_percent: Sequence[float],
                   rss_bytes: Sequence[float], phases: Sequence[dict[str, Any]]) -> None:
    """CPU % (blue, left axis) and RSS MB (red, right axis) on ``ax``; each phase a shaded
    span named at its top."""
    ax.plot(t_s, cpu_percent, color="tab:blue")
    ax.set_ylabel("CPU %", color="tab:blue", fontsize=8)
    memory = ax.twinx()
    memory.plot(t_s, np.asarray(rss_bytes, dtype=float) / BYTES_PER_MB, color="tab:red")
    memory.set_ylabel("RSS MB", color="tab:red", fontsize=8)
    for j, phase in enumerate(phases):
        ax.axvspan(phase["start_s"], phase["end_s"], alpha=0.12,
                   color="grey" if j % 2 else "gold")
        ax.text((phase["start_s"] + phase["end_s"]) / 2, ax.get_ylim()[1] * 0.92,
                phase["name"], ha="center", fontsize=6)


def prepare_plotting() -> None:
    """Import matplotlib (about 0.5 s) now, before anything is measured, rather than at the
    run's end where a study's trial would wait for it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure  # noqa: F401


def plot_timeline(timeline: Any, path: Path) -> None:
    """Write ``timeline`` (a :class:`~mlflow_dlaas.monitor.timeline.Timeline`) as a PNG."""
    prepare_plotting()
    from matplotlib.figure import Figure

    samples = timeline.samples
    figure = Figure(figsize=(9, 3), dpi=110)
    ax = figure.add_subplot()
    paint_timeline(ax, [s.t_s for s in samples],
                   [s.values.get(PROC_CPU_PERCENT, np.nan) for s in samples],
                   [s.values.get(PROC_RSS, np.nan) for s in samples],
                   [vars(p) for p in timeline.phases])
    ax.set_xlabel("seconds since the monitor started")
    ax.set_title("process tree: CPU (blue) and resident memory (red) per phase", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, format="png")
