"""Is the best configuration told apart from the next best, and by a gap that matters?

A rank test on the replicates of both: Mann-Whitney U, two-sided. It assumes nothing about
the shape of the spread, which on a shared machine is skewed by bursts of other load. With
many replicates any difference separates, so a winner also needs an effect: its median
ahead of the next best's by at least :data:`MIN_EFFECT`; a smaller gap is "no meaningful
difference", with both medians shown.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import mannwhitneyu

#: a winner needs p below this
ALPHA = 0.05
#: replicates each configuration needs before the test is tried at all
MIN_REPLICATES = 3
#: the smallest gap between medians, relative to the next best's, that counts as an effect
MIN_EFFECT = 0.05


@dataclass(frozen=True)
class Separation:
    """The verdict: ``separated`` only when the rank test says so; ``text`` for a person."""

    separated: bool
    text: str
    p_value: float | None = None
    #: the rank test separated them, but the medians are less than MIN_EFFECT apart
    small_effect: bool = False


def relative_gap(a: Sequence[float], b: Sequence[float]) -> float:
    """How far ``a``'s median lies from ``b``'s, relative to ``b``'s (NaN where b's is 0)."""
    below = statistics.median(b)
    return abs(statistics.median(a) - below) / abs(below) if below else math.nan


def meaningful(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether the medians are at least :data:`MIN_EFFECT` apart."""
    gap = relative_gap(a, b)
    return math.isnan(gap) or gap >= MIN_EFFECT


def best_possible_p(n: int, m: int) -> float:
    """The smallest two-sided p the exact test can give ``n`` against ``m`` runs (when every
    run of one beats every run of the other): 2 / C(n + m, n)."""
    return min(1.0, 2 / math.comb(n + m, n))


def separate(best: Sequence[float], next_best: Sequence[float] | None,
             runs_label: str = "valid runs") -> Separation:
    """The verdict on the best configuration's values against the next best's.

    ``runs_label`` names the runs the values come from ("valid runs").
    """
    if next_best is None:
        return Separation(False, "the only qualifying configuration: nothing to compare it with")
    n, m = len(best), len(next_best)
    if min(n, m) < MIN_REPLICATES:
        label = runs_label if n != 1 else runs_label.removesuffix("s")
        return Separation(False, f"not separable from the next best: it has {n} {label}, "
                          f"the next best {m}; a winner needs at least {MIN_REPLICATES} of "
                          "each, so repeat the runs")
    p = float(mannwhitneyu(best, next_best, alternative="two-sided").pvalue)
    gap = relative_gap(best, next_best)
    if p < ALPHA and not meaningful(best, next_best):
        return Separation(False, f"no meaningful difference from the next best: medians "
                          f"{statistics.median(best):.4g} vs {statistics.median(next_best):.4g}"
                          f", {gap:.1%} apart, below the {MIN_EFFECT:.0%} minimum (the rank "
                          f"test separates them: p = {p:.2g}, {n} vs {m} {runs_label})", p,
                          small_effect=True)
    if p < ALPHA:
        ahead = f"{gap:.0%} ahead of" if not math.isnan(gap) else "better than"
        return Separation(True, f"a clear winner: {ahead} the next best beyond the noise "
                          f"(rank test p = {p:.2g} < {ALPHA}, {n} vs {m} {runs_label})", p)
    floor = best_possible_p(n, m)
    if floor >= ALPHA:
        return Separation(False, f"not separable from the next best: {n} vs {m} {runs_label} "
                          f"are too few for the rank test (p = {p:.2g}; with so few runs it "
                          f"cannot go below {floor:.2g}, {ALPHA} needed); run each at least "
                          f"{_enough_each()} times", p)
    return Separation(False, f"not separable from the next best: the gap could be noise "
                      f"(rank test p = {p:.2g}, {ALPHA} needed; {n} vs {m} {runs_label})", p)


def _enough_each() -> int:
    """The fewest replicates per configuration that can reach p < ALPHA."""
    n = MIN_REPLICATES
    while best_possible_p(n, n) >= ALPHA:
        n += 1
    return n
