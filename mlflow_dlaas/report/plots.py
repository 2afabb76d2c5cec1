"""What every plot shares: the ``Plot`` value, PNG rendering, colours, Pareto fronts."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the file-only backend)
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

DPI = 110


@dataclass(frozen=True)
class Plot:
    """A rendered figure, or the reason it could not be drawn."""

    name: str
    title: str
    caption: str
    png: bytes | None = None
    missing: str | None = None


def draw(name: str, title: str, caption: str, paint: Callable[[Figure], None],
         size: tuple[float, float] = (7.0, 4.2)) -> Plot:
    """Render ``paint(figure)`` to PNG bytes."""
    figure = plt.figure(figsize=size, dpi=DPI)
    try:
        paint(figure)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        return Plot(name, title, caption, png=buffer.getvalue())
    finally:
        plt.close(figure)


def log_scale(ax: Axes, which: str) -> None:
    """A log ``which`` ("x" or "y") axis labelled with plain numbers (1, 2, 5, 10, 20 ...),
    not powers of ten."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def whole_number_ticks(ax: Axes, which: str) -> None:
    """Ticks only at whole numbers on ``which`` axis (threads, instances, copies)."""
    (ax.xaxis if which == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))


def missing(name: str, title: str, reason: str) -> Plot:
    return Plot(name, title, "", missing=reason)


KNOWN_SYSTEMS = ("pytorch", "tensorflow", "mxnet", "onnxruntime", "openvino")


def colours(systems: Sequence[str]) -> dict[str, str]:
    """One colour per framework or runtime, the same in every plot of every report."""
    palette = plt.get_cmap("tab10").colors
    others = sorted(set(systems) - set(KNOWN_SYSTEMS))
    order = {s: i for i, s in enumerate((*KNOWN_SYSTEMS, *others))}
    return {s: matplotlib.colors.to_hex(palette[order[s] % len(palette)]) for s in set(systems)}


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points not dominated when x is minimized and y maximized, by increasing x."""
    front: list[tuple[float, float]] = []
    best_y = float("-inf")
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best_y:
            front.append((x, y))
            best_y = y
    return front
