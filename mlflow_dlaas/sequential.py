"""The rule that decides a comparison of two configurations over rounds of measurement,
looking after every round, while the whole procedure's rate of false "different" verdicts
stays at or below :data:`~mlflow_dlaas.decidable.ALPHA` (5 %).

**Design.** In each round both configurations run once, in a seeded random order, and the
rounds follow one another (a drift lands on both sides). Round ``i`` gives one paired
difference ``d_i = log(a_i) - log(b_i)``; the statistic is their mean, the log of the ratio
of geometric means (the one statistic every answer ranks and compares by). Its null
distribution is the sign-flip (paired permutation) distribution: every one of the ``2^k``
ways to swap the two labels within rounds (exact up to :data:`EXACT_ROUNDS` rounds, a seeded
sample beyond). The report's paired test over interleaved rounds is the same test.

**Error control across looks.** A look after ``k`` rounds can reach no p below
``2 / 2^k``; a look that cannot reach the per-look level spends nothing. The level is split
evenly over the looks that can reach it (a Bonferroni alpha-spending): with ``L`` such looks,
each is tested at ``ALPHA / L``, and by the union bound the chance that any look falsely
says "different" is at most ``ALPHA``, whatever the looks' correlation. For the default
budget of 12 rounds that is 5 looks (rounds 8 to 12) at 1 % each.

**Verdicts at a look**, at the per-look level ``a``:

- *different* (``a lower`` or ``a higher``): the two-sided sign-flip test of "no
  difference" rejects at ``a`` and the ratio lies beyond the minimum effect ``e`` (5 %);
- *no meaningful difference*: two one-sided tests (TOST) reject, each at ``a / 2``, both
  "the ratio is at least ``1 + e``" and "the ratio is at most ``1 / (1 + e)``": the
  ``1 - a`` interval lies within ``1 / (1 + e) .. 1 + e``, the report's own rule for
  that verdict (:mod:`mlflow_dlaas.report.effect`) at the per-look level;
- else *open*: measure another round, up to the budget. An answer still open says about
  how many more rounds would decide (normal approximation from the differences' spread).

``benchmarks/sequential_rule.py`` prints the rule's error rate and power by simulation;
``tests/decide/test_sequential.py`` holds them to the bounds (docs/report.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from itertools import product
from statistics import NormalDist

import numpy as np

from mlflow_dlaas.decidable import ALPHA, MIN_EFFECT
from mlflow_dlaas.errors import ConfigError

#: the default budget: rounds of both configurations, the first ones included
DEFAULT_MAX_ROUNDS = 12
#: sign flips enumerated exactly up to this many rounds (2^14 arrangements)
EXACT_ROUNDS = 14
#: sign flips drawn (seeded) beyond :data:`EXACT_ROUNDS`
DRAWN_FLIPS = 20_000
#: studies judged at once (bounds the memory of the null distributions)
CHUNK = 256


class Decision(StrEnum):
    """What a look decides, for ``a`` against ``b``."""

    A_LOWER = "a lower"
    A_HIGHER = "a higher"
    SAME = "no meaningful difference"
    OPEN = "open"


@dataclass(frozen=True)
class Judged:
    """One comparison's decision, the round it was made at, and the figures behind it."""

    decision: Decision
    rounds: int  # rounds measured when decided (all of them when open)
    ratio: float  # geometric-mean ratio a / b
    more_rounds: int  # about how many more rounds would decide an open one; 0 when decided


@dataclass(frozen=True)
class SequentialRule:
    """Look after every round up to ``max_rounds``; decide at the per-look :attr:`level`."""

    max_rounds: int = DEFAULT_MAX_ROUNDS
    alpha: float = ALPHA
    min_effect: float = MIN_EFFECT

    @property
    def looks(self) -> tuple[int, ...]:
        """The rounds whose look can decide: those whose smallest p reaches the level."""
        for count in range(1, self.max_rounds + 1):
            level = self.alpha / count
            first = next((k for k in range(1, self.max_rounds + 1) if 2 / 2 ** k < level),
                         None)
            if first is not None and self.max_rounds - first + 1 <= count:
                return tuple(range(first, self.max_rounds + 1))
        return ()

    @property
    def level(self) -> float:
        """Each look's level: ``alpha`` split evenly over :attr:`looks`."""
        return self.alpha / max(len(self.looks), 1)

    def describe(self) -> str:
        """The rule in one line, for a report or a dry run."""
        looks = self.looks
        if not looks:
            return (f"{self.max_rounds} rounds can never decide at {self.alpha:g} "
                    "(too few for any look)")
        return (f"a look after every round from round {looks[0]} to {looks[-1]}, each at "
                f"level {self.level:.3g} (alpha {self.alpha:g} split over {len(looks)} "
                f"looks); 'no meaningful difference': its {1 - self.level:.0%} interval within "
                f"±{self.min_effect:.0%} (TOST at {self.level / 2:.3g} a side)")

    def judge(self, log_a: np.ndarray, log_b: np.ndarray) -> list[Judged]:
        """Each comparison (row) of ``log_a`` against ``log_b`` (shape: comparisons x
        rounds, the logs of the runs' values, round by round; NaN where a round is missing
        at the end), judged at every look it has reached, stopping at its first decision."""
        differences = np.atleast_2d(np.asarray(log_a, float) - np.asarray(log_b, float))
        rounds = np.sum(np.isfinite(differences), axis=1)
        decision = np.full(len(differences), Decision.OPEN, dtype=object)
        at = rounds.copy()
        for k in self.looks:
            pending = np.flatnonzero((decision == Decision.OPEN) & (rounds >= k))
            if not len(pending):
                continue
            found = self._decide(differences[pending, :k])
            decided = found != Decision.OPEN
            decision[pending[decided]] = found[decided]
            at[pending[decided]] = k
        judged = []
        for row, verdict, k in zip(differences, decision, at, strict=True):
            seen = row[:k][np.isfinite(row[:k])]
            ratio = math.exp(float(seen.mean())) if len(seen) else math.nan
            more = 0 if verdict != Decision.OPEN else self.more_rounds(seen)
            judged.append(Judged(Decision(verdict), int(k), ratio, more))
        return judged

    def _decide(self, differences: np.ndarray) -> np.ndarray:
        """Decisions for comparisons with the same number of rounds (rows of differences)."""
        flips = _flips(differences.shape[1])
        edge = math.log1p(self.min_effect)
        out = np.empty(len(differences), dtype=object)
        for start in range(0, len(differences), CHUNK):
            rows = differences[start:start + CHUNK]
            mean = rows.mean(axis=1)
            different = (_p_two_sided(rows, flips) < self.level) & (np.abs(mean) >= edge)
            same = ((_p_below(rows - edge, flips) < self.level / 2)
                    & (_p_above(rows + edge, flips) < self.level / 2))
            out[start:start + CHUNK] = np.where(
                different, np.where(mean < 0, Decision.A_LOWER, Decision.A_HIGHER),
                np.where(same, Decision.SAME, Decision.OPEN))
        return out

    def more_rounds(self, differences: np.ndarray) -> int:
        """About how many more rounds would decide, after the rounds ``differences``
        (normal approximation at the per-look level); at least 1."""
        k = len(differences)
        if k < 2:
            return max(self.looks[0] - k, 1) if self.looks else 1
        return self.rounds_needed(float(np.mean(differences)),
                                  float(np.std(differences, ddof=1)), k)

    def rounds_needed(self, mean: float, spread: float, done: int) -> int:
        """About how many rounds beyond ``done`` would decide a comparison whose paired
        log differences have this ``mean`` and standard deviation ``spread``: until the
        interval excludes "no effect" where the gap exceeds the minimum effect, else until
        it fits within it; never before the first look; at least 1."""
        first = self.looks[0] if self.looks else self.max_rounds + 1
        edge, mean = math.log1p(self.min_effect), abs(mean)
        if not math.isfinite(spread) or spread == 0:
            return max(first - done, 1)
        z = NormalDist().inv_cdf(1 - self.level / 2)
        margin = mean if mean >= edge else max(edge - mean, edge / 4)
        needed = math.ceil((z * spread / margin) ** 2)
        return max(needed - done, first - done, 1)


def _flips(rounds: int) -> np.ndarray:
    """Every sign pattern over ``rounds`` (or a seeded sample of them), as rows of +-1."""
    if rounds <= EXACT_ROUNDS:
        return np.array(list(product((1.0, -1.0), repeat=rounds)))
    drawn = np.random.default_rng(0).integers(0, 2, (DRAWN_FLIPS, rounds)) * 2.0 - 1.0
    drawn[0] = 1.0  # the observed labelling is one of them
    return drawn


def _null(rows: np.ndarray, flips: np.ndarray) -> np.ndarray:
    """The mean under each sign pattern: comparisons x patterns."""
    return rows @ flips.T / rows.shape[1]


def _p_two_sided(rows: np.ndarray, flips: np.ndarray) -> np.ndarray:
    observed = np.abs(rows.mean(axis=1, keepdims=True))
    return np.mean(np.abs(_null(rows, flips)) >= observed - 1e-12, axis=1)


def _p_below(rows: np.ndarray, flips: np.ndarray) -> np.ndarray:
    """One-sided p that the mean of ``rows`` is below 0 (small when it clearly is)."""
    return np.mean(_null(rows, flips) <= rows.mean(axis=1, keepdims=True) + 1e-12, axis=1)


def _p_above(rows: np.ndarray, flips: np.ndarray) -> np.ndarray:
    """One-sided p that the mean of ``rows`` is above 0."""
    return np.mean(_null(rows, flips) >= rows.mean(axis=1, keepdims=True) - 1e-12, axis=1)


@dataclass(frozen=True)
class Budget:
    """How much ``decide`` may measure: rounds (the sequential rule's budget) and minutes.

    Within ``minutes`` a round after the first starts only where it is expected to end in
    time (the last round's duration).
    """

    rounds: int
    minutes: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> Budget:
        """``12`` (rounds) or ``10m`` (minutes, within the default budget of rounds); None:
        the default budget of rounds."""
        if text is None:
            return cls(SequentialRule().max_rounds)
        text = text.strip().lower()
        number = _number(text.removesuffix("m"))
        if number is None or number <= 0:
            raise ConfigError(f"--budget {text!r}: give rounds (e.g. 12) or minutes (e.g. 10m)")
        if text.endswith("m"):
            return cls(SequentialRule().max_rounds, number)
        rounds = int(number)
        fewest = next(n for n in range(1, 64) if SequentialRule(n).looks)
        if rounds != number or rounds < fewest:
            raise ConfigError(f"--budget {text}: {SequentialRule(rounds).describe()}; give "
                              f"a whole number of rounds, at least {fewest}, or minutes (10m)")
        return cls(rounds)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
