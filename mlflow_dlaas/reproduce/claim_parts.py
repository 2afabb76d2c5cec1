"""What a claim's verdict is made of: the verdict words, the metrics claims speak of, one
comparison of two settings (:class:`Comparison`, by the report's effect), the parts a claim
splits into and how they combine, and the helpers the judges (:mod:`.claim_verdicts`) share."""


from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from mlflow_dlaas.report.comparable import effect_between, match
from mlflow_dlaas.report.derived import ENERGY_PER_1000, PEAK_MEMORY
from mlflow_dlaas.report.effect import Effect, Verdict
from mlflow_dlaas.runs import schema

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
NOT_SEPARABLE = "not separable"
NO_MEANINGFUL_DIFFERENCE = "no meaningful difference"
NOT_MEASURABLE = "not measurable here"

TRAIN_TIME = f"metrics.{schema.TRAIN_TIME}"
ACCURACY = f"metrics.{schema.TEST_ACCURACY}"
MEMORY = f"metrics.{PEAK_MEMORY}"
CPU_PERCENT = f"metrics.{schema.TRAIN_MEAN_CPU}"
P50 = f"metrics.{schema.P50_LATENCY}"
THROUGHPUT = f"metrics.{schema.INFERENCE_THROUGHPUT}"
ENERGY_1000 = f"metrics.{ENERGY_PER_1000}"
COPIES_THROUGHPUT = f"metrics.{schema.scenario_key('ensemble', schema.THROUGHPUT)}"
COPIES_MEMORY = f"metrics.ensemble/{schema.PHASE_PEAK_MEMORY}"
HYPER_PARAMETERS = ("params.batch_size", "params.learning_rate")
LIBRARY_SETTINGS = ("params.openmp_runtime", "params.allocator", "params.onednn")
RUNTIME_SETTINGS = ("batch_size", "params.intra_op_threads", "params.graph_optimization_level",
                    "params.precision")
DEFAULTS = ("", "default")
#: beyond this median gain from batch 64 to the largest batch, throughput still grows
SATURATION_GAIN = 1.10
#: per metric, how a ratio above 1 and one below 1 read in words ("1.20x slower")
DIRECTION_WORDS = {TRAIN_TIME: ("slower", "faster"), P50: ("slower", "faster"),
                   ACCURACY: ("more accurate", "less accurate"),
                   MEMORY: ("more memory", "less memory"), CPU_PERCENT: ("more CPU", "less CPU"),
                   THROUGHPUT: ("higher throughput", "lower throughput"),
                   ENERGY_1000: ("more energy", "less energy"),
                   COPIES_THROUGHPUT: ("higher throughput", "lower throughput"),
                   COPIES_MEMORY: ("more memory", "less memory")}
SHORT = {TRAIN_TIME: "train time", ACCURACY: "accuracy", MEMORY: "peak memory",
         CPU_PERCENT: "CPU % while training", P50: "single-stream p50",
         THROUGHPUT: "offline throughput", ENERGY_1000: "energy per 1,000 predictions",
         COPIES_THROUGHPUT: "throughput of all copies", COPIES_MEMORY: "peak memory of all copies"}


#: metrics where more is better (every other: less is better)
HIGHER_IS_BETTER = (ACCURACY, THROUGHPUT, COPIES_THROUGHPUT)


@dataclass(frozen=True)
class Comparison:
    """One test: the runs of setting ``a`` against those of ``b`` on one metric, as an
    effect (a ratio with its interval), or a correlation said in words."""

    what: str  # "pytorch, train time: batch_size 256 vs 32"
    metric: str
    a: tuple[float, ...]
    b: tuple[float, ...]
    run_ids: tuple[str, ...]
    effect: Effect | None = None
    #: a test that is not a ratio (a rank correlation): its result in words, and whether it
    #: separated
    said: str = ""
    correlated: bool = False

    @property
    def separated(self) -> bool:
        return self.effect.verdict.decided if self.effect else self.correlated

    @property
    def small_effect(self) -> bool:
        """The interval lies within the minimum effect."""
        return self.effect is not None and self.effect.verdict is Verdict.NO_DIFFERENCE

    @property
    def ratio(self) -> float:
        """``a`` over ``b`` (geometric means; NaN where either is missing)."""
        return self.effect.ratio if self.effect else math.nan

    @property
    def direction(self) -> int:
        """+1 when ``a`` is separated above ``b``, -1 below, 0 when not separated."""
        if not self.separated or self.effect is None:
            return 0
        return 1 if self.effect.ratio > 1 else -1

    def outcome(self) -> str:
        """The comparison in the report's words, with its test."""
        return self.effect.sentence() if self.effect else self.said


@dataclass(frozen=True)
class Part:
    """One part of a claim, its outcome and the tests behind it."""

    text: str
    outcome: str  # HOLDS, DOES_NOT_HOLD or NOT_SEPARABLE
    why: str
    comparisons: tuple[Comparison, ...] = ()


@dataclass(frozen=True)
class ClaimVerdict:
    """A claim's verdict, the reason in one sentence and its parts."""

    verdict: str
    reason: str
    parts: tuple[Part, ...] = ()

    @property
    def run_ids(self) -> tuple[str, ...]:
        """Every run a test used, once, in order."""
        seen: dict[str, None] = {}
        for part in self.parts:
            for comparison in part.comparisons:
                seen.update(dict.fromkeys(comparison.run_ids))
        return tuple(seen)


def combine(parts: Sequence[Part]) -> ClaimVerdict:
    """Holds when every part holds, does not hold when any part does not, else not separable."""
    if not parts:
        return ClaimVerdict(NOT_SEPARABLE, "no valid runs to test: run the claim's study")
    against = [p for p in parts if p.outcome == DOES_NOT_HOLD]
    if against:
        return ClaimVerdict(DOES_NOT_HOLD, "; ".join(f"{p.text}: {p.why}" for p in against),
                       tuple(parts))
    open_parts = [p for p in parts if p.outcome != HOLDS]
    if open_parts:
        small = all(p.outcome == NO_MEANINGFUL_DIFFERENCE for p in open_parts)
        return ClaimVerdict(NO_MEANINGFUL_DIFFERENCE if small else NOT_SEPARABLE,
                       "; ".join(f"{p.text}: {p.why}" for p in open_parts), tuple(parts))
    return ClaimVerdict(HOLDS, "; ".join(f"{p.text}: {p.why}" for p in parts), tuple(parts))


def compare(what: str, metric: str, a: pd.DataFrame, b: pd.DataFrame) -> Comparison:
    """``a``'s runs against ``b``'s on ``metric`` (a ``metrics.*`` column)."""
    got_a, ids_a = values_of(a, metric)
    got_b, ids_b = values_of(b, metric)
    return Comparison(what, metric, tuple(got_a), tuple(got_b), (*ids_a, *ids_b),
                      effect_between(a, b, metric, lower_is_better=lower_is_better(metric)))


def lower_is_better(metric: str) -> bool:
    return metric not in HIGHER_IS_BETTER


def values_of(rows: pd.DataFrame, metric: str) -> tuple[list[float], list[str]]:
    if metric not in rows or rows.empty:
        return [], []
    values = pd.to_numeric(rows[metric], errors="coerce")
    kept = rows[values.notna()]
    return [float(v) for v in values.dropna()], [str(r) for r in kept["run_id"]]


def median_of(values: Sequence[float]) -> float:
    return float(pd.Series(list(values), dtype=float).median())


def levels_of(rows: pd.DataFrame, column: str) -> list[str]:
    """The values of a setting, in numeric order where they are numbers."""
    values = [str(v) for v in rows[column].dropna().unique()] if column in rows else []
    return sorted(values, key=lambda v: (number_in(v) is None, number_in(v) or 0.0, v))


def number_in(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def part_any(text: str, comparisons: list[Comparison], want: int | None = None) -> Part:
    """Holds when a test separates in the wanted direction (either, for None); does not hold
    when tests separate only against it; not separable when none separates."""
    if not comparisons:
        return Part(text, NOT_SEPARABLE, "no two settings have counted runs to compare")
    good = [c for c in comparisons if c.direction != 0 and (want is None or c.direction == want)]
    if good:
        return Part(text, HOLDS, f"{good[0].what}, {fold(good[0])}", tuple(comparisons))
    bad = [c for c in comparisons if c.direction != 0]
    if bad:
        return Part(text, DOES_NOT_HOLD, f"{bad[0].what}, the other way: {fold(bad[0])}",
                    tuple(comparisons))
    small = [c for c in comparisons if c.small_effect]
    if small:
        return Part(text, NO_MEANINGFUL_DIFFERENCE, f"{small[0].what}, {fold(small[0])}",
                    tuple(comparisons))
    return Part(text, NOT_SEPARABLE, f"{comparisons[0].what}: {comparisons[0].outcome()}",
                tuple(comparisons))


def part_all(text: str, groups: dict[str, list[Comparison]], want: int | None = None) -> Part:
    """Holds when it holds in every group (framework, runtime); does not hold when it does
    not in one; else not separable."""
    if not groups:
        return Part(text, NOT_SEPARABLE, "no two settings have counted runs to compare")
    judged = {name: part_any(text, found, want) for name, found in groups.items()}
    comparisons = tuple(c for part in judged.values() for c in part.comparisons)
    for outcome in (DOES_NOT_HOLD, NOT_SEPARABLE, NO_MEANINGFUL_DIFFERENCE):
        failing = [p.why for p in judged.values() if p.outcome == outcome]
        if failing:
            return Part(text, outcome, "; ".join(failing), comparisons)
    return Part(text, HOLDS, "; ".join(p.why for p in judged.values()), comparisons)


def fold(c: Comparison) -> str:
    """The ratio with its direction in words: ``1.20x slower (separated ...)``."""
    return f"{in_words(c.ratio, c.metric)} ({c.outcome()})"


def in_words(ratio: float, metric: str) -> str:
    """``ratio`` (a over b) as a person says it: ``1.20x slower`` for 1.2 on a time, ``1.25x
    faster`` for 0.8; ``1.00x, equal``; a plain ``0.97x`` for a metric without words."""
    if math.isnan(ratio) or ratio <= 0:
        return f"{ratio:.2f}x"
    up, down = DIRECTION_WORDS.get(metric, ("larger", "smaller"))
    if round(ratio, 2) == 1.0:
        return "1.00x, equal"
    return f"{ratio:.2f}x {up}" if ratio > 1 else f"{1 / ratio:.2f}x {down}"


def by_system(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {str(s): g for s, g in rows.groupby("system", sort=True)} if len(rows) else {}


def extremes(rows: pd.DataFrame, column: str, metric: str, system: str
              ) -> Comparison | None:
    """The largest level of ``column`` against the smallest, on ``metric``."""
    levels = levels_of(rows, column)
    if len(levels) < 2:
        return None
    top, low = levels[-1], levels[0]
    name = column.removeprefix("params.")
    matching = match(rows.assign(**{column: rows[column].astype(str)}), column, [top], [low])
    chosen = [r for c in matching.cells for r in c.chosen["run_id"]]
    baseline = [r for c in matching.cells for r in c.baseline["run_id"]]
    got_a, _ = values_of(rows[rows["run_id"].isin(chosen)], metric)
    got_b, _ = values_of(rows[rows["run_id"].isin(baseline)], metric)
    return Comparison(f"{system}, {SHORT.get(metric, metric)}: {name} {top} vs {low}", metric,
                      tuple(got_a), tuple(got_b), (*chosen, *baseline),
                      matching.effect(metric, lower_is_better=lower_is_better(metric)))


# --- training claims -----------------------------------------------------------------------
