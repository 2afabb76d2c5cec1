"""Money per answer: a host class's price per hour turned into USD per 1,000 predictions (at
its best offline throughput) and per training run (its best time), each with a 95 % interval
that follows from the figure's own (a t interval on the runs' logarithms), and the price's
source and date carried beside it."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from scipy import stats

from mlflow_dlaas.errors import ConfigError

DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Prices:
    """USD per hour of each host class, and where and when the prices were read."""

    usd_per_hour: Mapping[str, float]
    source: str
    date: str

    @property
    def cited(self) -> str:
        return f"{self.source}, {self.date}"


def parse_prices(pairs: Sequence[str], source: str | None, date: str | None,
                 file: str | None = None) -> Prices | None:
    """``--price CLASS=USD_PER_HOUR`` (with ``--price-source`` and ``--price-date``), or a
    prices file (``source:``, ``date:``, ``usd_per_hour: {CLASS: USD}``); None without any."""
    if file is not None:
        try:
            raw = yaml.safe_load(Path(file).read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"--prices {file}: cannot read it ({e})") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("usd_per_hour"), dict):
            raise ConfigError(f"--prices {file}: write source:, date: and usd_per_hour: "
                              "{CLASS: USD, ...}")
        pairs = [*pairs, *(f"{k}={v}" for k, v in raw["usd_per_hour"].items())]
        source, date = source or raw.get("source"), date or str(raw.get("date") or "")
    if not pairs:
        return None
    prices = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        try:
            usd = float(value)
        except ValueError:
            usd = math.nan
        if not name or not math.isfinite(usd) or usd <= 0:
            raise ConfigError(f"--price {pair!r}: write CLASS=USD_PER_HOUR, e.g. "
                              "c7i.large=0.08925")
        prices[name] = usd
    if not source or not date or not DATE.fullmatch(date):
        raise ConfigError("a price needs its source and date: --price-source 'AWS on-demand, "
                          "us-east-1' --price-date 2026-12-01 (or source: and date: in the "
                          "prices file)")
    return Prices(prices, source, date)


def geometric_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The geometric mean and its 95 % interval (a t interval on the logarithms); the ends
    NaN with fewer than two values."""
    logs = np.log(np.asarray(values, dtype=float))
    middle = float(np.exp(logs.mean()))
    if len(logs) < 2:
        return middle, math.nan, math.nan
    half = float(stats.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs)))
    return middle, float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))


def cost_text(metric: str, values: Sequence[float], usd_per_hour: float) -> str:
    """``USD 0.00000216 per 1,000 predictions (offline) (95 % CI ...)`` for an offline
    throughput in samples/s or a server capacity in queries/s (a query: one sample), ``USD
    0.0123 per training run`` for a training time in seconds; '' for any other."""
    if not values:
        return ""
    middle, low, high = geometric_interval(values)
    per_second = usd_per_hour / SECONDS_PER_HOUR
    if metric.endswith(("throughput_samples_per_second", "server_max_qps_within_p99_bound")):
        served = "at its server capacity" if "qps" in metric else "offline"
        figure, ends, what = (1000 * per_second / middle,
                              (1000 * per_second / high, 1000 * per_second / low),
                              f"per 1,000 predictions ({served})")
    elif metric.endswith("_seconds") and ("train" in metric or "time_to_accuracy" in metric):
        figure, ends, what = per_second * middle, (per_second * low, per_second * high), \
            "per training run"
    else:
        return ""
    interval = "" if math.isnan(ends[0]) else \
        f" (95 % CI USD {_usd(ends[0])}–{_usd(ends[1])})"
    return f"USD {_usd(figure)} {what}{interval} at USD {usd_per_hour:g}/h"


def _usd(value: float) -> str:
    """Cents where a figure has them, else three significant digits."""
    return f"{value:.2f}" if value >= 0.1 else f"{value:.3g}"
