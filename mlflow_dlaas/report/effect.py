"""How much better or worse one configuration is than another: a ratio with a 95 % interval,
and a verdict in the same few words everywhere (report, ``recommend``, ``reproduce``).

The test is an exact permutation test on the logarithms of the runs' values (a run's value
is positive: a time, a rate, a memory or an energy), so the effect is a ratio. The runs
come in strata: one stratum for two plain groups of runs, one per cell where a comparison
is matched over the other settings (the labels are permuted within cells only), one per
round where replicates ran in complete interleaved rounds (the paired test). The statistic
is the weighted mean over strata of the difference of mean logs; its exponent is the ratio
(of geometric means). The interval is the set of ratios the test does not reject at 5 %
(test inversion), so the interval and the test never disagree (Kalibera and Jones,
"Rigorous Benchmarking in Reasonable Time": ratios with intervals; pyperf's ``compare_to``
is a t-test without an interval, so the interval by inversion is not pyperf's).

Verdicts, for a minimum effect ``e`` (5 % by default):

- **better by X** / **worse by X**: the interval excludes 1 and the ratio lies beyond ``e``;
- **no meaningful difference**: the whole interval lies within ``1 - e .. 1 + e``;
- **not separable**: the interval spans the minimum effect (the gap could be noise);
- **too few runs**: fewer than three runs a side, or so few permutations that no outcome
  could reach p < 0.05.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import combinations

import numpy as np

from mlflow_dlaas.decidable import ALPHA, MIN_EFFECT, fewest_runs_per_side
from mlflow_dlaas.figures import percent, significant

#: runs each side needs before the test is tried at all
MIN_REPLICATES = 3
#: permutations enumerated exactly up to this many; beyond, this many drawn at random
EXACT_LIMIT = 20_000
#: bisection steps of the interval's ends (each halves the bracket)
BISECTION_STEPS = 40

Stratum = tuple[Sequence[float], Sequence[float]]


class Verdict(StrEnum):
    """One of the few words every comparison ends in."""

    BETTER = "better"
    WORSE = "worse"
    NO_DIFFERENCE = "no meaningful difference"
    NOT_SEPARABLE = "not separable"
    TOO_FEW = "too few runs"

    @property
    def decided(self) -> bool:
        """Whether the comparison separated the two (better or worse)."""
        return self in (Verdict.BETTER, Verdict.WORSE)


@dataclass(frozen=True)
class Effect:
    """``a`` against ``b``: the ratio of ``a`` over ``b``, its 95 % interval and the verdict
    for the direction that is better (``lower_is_better``)."""

    verdict: Verdict
    ratio: float  # geometric-mean ratio a / b; NaN where there are no values
    low: float  # the interval's ends; NaN where the runs are too few for one
    high: float
    p_value: float | None
    runs: tuple[int, int]
    design: str  # how the runs were set against each other, in words
    lower_is_better: bool
    min_effect: float = MIN_EFFECT
    #: why the verdict is "too few runs", where it is
    shortfall: str = ""
    #: the level tested at: the interval is the ``1 - alpha`` one
    alpha: float = ALPHA

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    def interval_text(self) -> str:
        """``ratio 0.88 (95 % CI 0.80–0.95)``, or the ratio alone."""
        if math.isnan(self.ratio):
            return "no ratio"
        text = f"ratio {significant(self.ratio)}"
        if self.has_interval:
            text += (f", {100 * (1 - self.alpha):.3g} % CI "
                     f"{significant(self.low)}–{significant(self.high)}")
        return text

    def words(self, rival: str = "") -> str:
        """The verdict a person reads: ``better by 12 % (ratio 0.880, 95 % CI
        0.800–0.950)``; against a named ``rival``: ``ahead of tensorflow by 12 % (...)``."""
        against = f" from {rival}" if rival else ""
        if self.verdict is Verdict.TOO_FEW:
            told = f" to tell it from {rival}" if rival else ""
            return f"too few runs{told} ({self.shortfall})"
        if self.verdict.decided:
            change = percent(abs(self.ratio - 1))
            if rival:
                side = "ahead of" if self.verdict is Verdict.BETTER else "behind"
                return f"{side} {rival} by {change} ({self.interval_text()})"
            return f"{self.verdict.value} by {change} ({self.interval_text()})"
        if self.verdict is Verdict.NO_DIFFERENCE:
            return (f"no meaningful difference{against} ({self.interval_text()}, within "
                    f"±{self.min_effect:.0%})")
        return f"not separable{against} ({self.interval_text()}: the gap could be noise)"

    def test_text(self) -> str:
        """``permutation test, unpaired, p = 0.029, 4 vs 4 runs``."""
        p = "" if self.p_value is None else f", p = {self.p_value:.2g}"
        n, m = self.runs
        return f"permutation test, {self.design}{p}, {n} vs {m} runs"

    def sentence(self) -> str:
        """The verdict and the test behind it."""
        if self.verdict is Verdict.TOO_FEW:
            return self.words()
        return f"{self.words()}; {self.test_text()}"


def compare_runs(a: Sequence[float], b: Sequence[float], *, lower_is_better: bool,
                 min_effect: float = MIN_EFFECT) -> Effect:
    """``a``'s runs against ``b``'s, unpaired."""
    return estimate([(a, b)], lower_is_better=lower_is_better, min_effect=min_effect,
                    design="unpaired")


def estimate(strata: Sequence[Stratum], *, lower_is_better: bool,
             min_effect: float = MIN_EFFECT, design: str = "unpaired", alpha: float = ALPHA,
             more: str = "") -> Effect:
    """The effect of ``a`` against ``b`` over ``strata`` (pairs of value lists; a stratum
    with a side empty is left out; non-positive values too), tested at ``alpha`` (a
    sequential rule's per-look level; its interval is then the ``1 - alpha`` one). ``more``:
    what would measure more, where the runs are too few (replicates by default)."""
    positive = [_positive(s) for s in strata]
    logged = [(np.log(x), np.log(y)) for x, y in positive if len(x) and len(y)]
    n, m = (sum(len(x) for x, _ in logged), sum(len(y) for _, y in logged)) if logged else (
        sum(len(x) for x, _ in positive), sum(len(y) for _, y in positive))
    ratio = math.exp(_statistic(logged)) if logged else math.nan

    def effect(verdict: Verdict, low: float = math.nan, high: float = math.nan,
               p: float | None = None, shortfall: str = "") -> Effect:
        return Effect(verdict, ratio, low, high, p, (n, m), design, lower_is_better,
                      min_effect, shortfall, alpha)

    if min(n, m) < MIN_REPLICATES:
        return effect(Verdict.TOO_FEW, shortfall=f"{n} vs {m}; "
                                                 f"{fewest_runs_per_side()} a side needed")
    null = _NullDistribution(logged, alpha)
    if null.smallest_p >= alpha:
        return effect(Verdict.TOO_FEW, p=null.p_value(0.0), shortfall=(
            f"{n} vs {m}: {null.count} arrangements{_within(design)}, so no outcome can "
            f"reach p < {alpha:.3g}; " + (more or f"measure more replicates "
                                           f"({fewest_runs_per_side()} a side can)")))
    p = null.p_value(0.0)
    low, high = null.interval(math.log(ratio))
    return effect(_verdict(ratio, math.exp(low), math.exp(high), lower_is_better, min_effect),
                  math.exp(low), math.exp(high), p)


def _within(design: str) -> str:
    """`` of 4 cells`` for a matched design, `` of 6 rounds`` for a paired one."""
    return "" if design.startswith("unpaired") else f" ({design.split(' (')[0]})"


def _verdict(ratio: float, low: float, high: float, lower_is_better: bool,
             min_effect: float) -> Verdict:
    if 1 - min_effect <= low and high <= 1 + min_effect:
        return Verdict.NO_DIFFERENCE
    beyond = ratio <= 1 - min_effect or ratio >= 1 + min_effect
    if beyond and (high < 1 or low > 1):
        return Verdict.BETTER if (ratio < 1) == lower_is_better else Verdict.WORSE
    return Verdict.NOT_SEPARABLE


def _positive(stratum: Stratum) -> tuple[np.ndarray, np.ndarray]:
    x, y = (np.asarray([v for v in side if v is not None and np.isfinite(v) and v > 0],
                       dtype=float) for side in stratum)
    return x, y


def _weight(x: np.ndarray, y: np.ndarray) -> float:
    return len(x) * len(y) / (len(x) + len(y))


def _statistic(logged: Sequence[tuple[np.ndarray, np.ndarray]]) -> float:
    """The weighted mean over strata of mean(log a) - mean(log b)."""
    weights = np.array([_weight(x, y) for x, y in logged])
    differences = np.array([x.mean() - y.mean() for x, y in logged])
    return float(weights @ differences / weights.sum())


class _NullDistribution:
    """The statistic under every relabelling within strata (or a seeded sample of them)."""

    def __init__(self, logged: Sequence[tuple[np.ndarray, np.ndarray]],
                 alpha: float = ALPHA) -> None:
        self.logged = list(logged)
        self.alpha = alpha
        weights = np.array([_weight(x, y) for x, y in self.logged])
        self.weights = weights / weights.sum()
        self.splits = [_splits(len(x), len(y)) for x, y in self.logged]
        self.count = math.prod(math.comb(len(x) + len(y), len(x)) for x, y in self.logged)
        self.exact = self.count <= EXACT_LIMIT
        rng = np.random.default_rng(0)
        self.draws = None if self.exact else [rng.integers(0, len(s), EXACT_LIMIT)
                                              for s in self.splits]
        #: the smallest p any outcome could give: 2 arrangements of the extreme, two-sided
        self.smallest_p = 2 / self.count if self.exact else 1 / (EXACT_LIMIT + 1)

    def _stratum(self, index: int, shift: float) -> np.ndarray:
        """One stratum's weighted statistic under each of its relabellings."""
        x, y = self.logged[index]
        pooled = np.concatenate([x - shift, y])
        split = self.splits[index]
        return self.weights[index] * (split @ pooled / len(x) - (~split) @ pooled / len(y))

    def _distribution(self, shift: float) -> tuple[float, np.ndarray]:
        """The observed statistic and its null distribution with ``shift`` taken off a's
        logs."""
        observed = float(sum(w * ((x - shift).mean() - y.mean())
                             for w, (x, y) in zip(self.weights, self.logged, strict=True)))
        parts = [self._stratum(i, shift) for i in range(len(self.logged))]
        if self.draws is not None:
            return observed, sum(part[draw] for part, draw in zip(parts, self.draws,
                                                                   strict=True))
        total = parts[0]
        for part in parts[1:]:
            total = (total[:, None] + part[None, :]).ravel()
        return observed, total

    def p_value(self, shift: float) -> float:
        """Two-sided p of the observed statistic with ``shift`` taken off a's logs."""
        observed, null = self._distribution(shift)
        extreme = int(np.count_nonzero(np.abs(null) >= abs(observed) - 1e-12))
        if self.exact:
            return extreme / len(null)
        return (extreme + 1) / (len(null) + 1)

    def interval(self, centre: float) -> tuple[float, float]:
        """The shifts (log ratios) the test does not reject, by bisection either side of
        ``centre`` (where p is 1)."""
        spread = max(float(np.ptp(np.concatenate([np.concatenate(s) for s in self.logged]))),
                     1e-9)
        return (self._edge(centre, centre - 2 * spread), self._edge(centre, centre + 2 * spread))

    def _edge(self, inside: float, outside: float) -> float:
        if self.p_value(outside) >= self.alpha:  # cannot happen while smallest_p < alpha
            return outside
        for _ in range(BISECTION_STEPS):
            middle = (inside + outside) / 2
            if self.p_value(middle) >= self.alpha:
                inside = middle
            else:
                outside = middle
        return inside


def _splits(n: int, m: int) -> np.ndarray:
    """Which of ``n + m`` pooled values go to side a: every choice of ``n`` (boolean rows),
    or :data:`EXACT_LIMIT` seeded random ones where there are more."""
    total = n + m
    if math.comb(total, n) <= EXACT_LIMIT:
        rows = np.zeros((math.comb(total, n), total), dtype=bool)
        for i, chosen in enumerate(combinations(range(total), n)):
            rows[i, list(chosen)] = True
        return rows
    chosen = np.argpartition(np.random.default_rng(0).random((EXACT_LIMIT, total)), n - 1,
                             axis=1)[:, :n]
    rows = np.zeros((EXACT_LIMIT, total), dtype=bool)
    np.put_along_axis(rows, chosen, True, axis=1)
    return rows
