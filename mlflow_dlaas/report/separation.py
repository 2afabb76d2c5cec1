"""Is the best configuration told apart from the next best, or could the gap be noise?

A rank test on the replicates of both: Mann-Whitney U, two-sided. It assumes nothing about
the shape of the spread, which on a shared machine is skewed by bursts of other load.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import mannwhitneyu

#: a winner needs p below this
ALPHA = 0.05
#: replicates each configuration needs before the test is tried at all
MIN_REPLICATES = 3


@dataclass(frozen=True)
class Separation:
    """The verdict: ``separated`` only when the rank test says so; ``text`` for a person."""

    separated: bool
    text: str
    p_value: float | None = None


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
    if p < ALPHA:
        return Separation(True, f"a clear winner: better than the next best beyond the noise "
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
