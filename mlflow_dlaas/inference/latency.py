"""Latency and throughput results, built from raw samples (warm-up never included).

Besides plain percentiles, a result carries MLPerf LoadGen's *early-stopping* estimate of
p99: the latency that the true 99th percentile stays under with 99 % confidence, given how
many queries were run. With few queries it is the maximum or close to it (a short run is
honest about what it knows); below ``early_stopping_min_queries(0.99)`` (662) queries there
is no estimate at all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from mlflow_dlaas.runs.schema import (
    LATENCY_MEAN,
    LATENCY_P50,
    LATENCY_P90,
    LATENCY_P95,
    LATENCY_P99,
    LATENCY_P99_EARLY_STOPPING,
    LATENCY_STDEV,
    MEASURED_TIME,
    QUERY_COUNT,
    THROUGHPUT,
)

CDF_POINTS = np.arange(101)
#: LoadGen's early-stopping confidence and tolerance (loadgen/results.cc).
EARLY_STOPPING_CONFIDENCE = 0.99
EARLY_STOPPING_TOLERANCE = 0.0


def _under_odds(h: int, t: int, p: float) -> float:
    """P(at most ``t`` of ``h + t`` queries exceed the true p-percentile): the regularized
    incomplete beta I_p(h, t + 1) of LoadGen's ``odds``, summed as a binomial tail."""
    n, x = h + t, np.arange(t + 1, dtype=np.float64)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log(n - x[:-1]) - np.log(x[:-1] + 1))))
    logs = log_choose + x * math.log(1.0 - p) + (n - x) * math.log(p)
    top = float(logs.max())
    return math.exp(top) * float(np.exp(logs - top).sum())


@lru_cache(maxsize=4096)
def min_passing_queries(t: int, p: float, confidence: float = EARLY_STOPPING_CONFIDENCE) -> int:
    """LoadGen's ``MinPassingQueriesFinder``: the fewest under-latency queries ``h`` that,
    beside ``t`` over-latency ones, show at ``confidence`` that the p-percentile holds."""
    target = 1.0 - confidence
    lo, hi = 1, 2
    while _under_odds(hi, t, p) >= target:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if _under_odds(mid, t, p) < target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def early_stopping_min_queries(p: float = 0.99) -> int:
    """Queries needed before LoadGen gives any early-stopping estimate of percentile ``p``."""
    return min_passing_queries(1, p) + 1


def early_stopping_estimate(latencies: np.ndarray, p: float = 0.99) -> float | None:
    """LoadGen's early-stopping estimate of the ``p`` percentile (single- and multi-stream
    rule): the ``t``-th highest latency, ``t`` the most queries that can be discarded as
    over-latency while ``n >= min_passing_queries(t) + t`` still holds; None when too few."""
    ordered = np.sort(np.asarray(latencies, dtype=np.float64))
    n = ordered.size
    if n < early_stopping_min_queries(p):
        return None
    lo, hi = 1, n  # the largest t with n >= h(t) + t (h(t) + t grows with t)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if min_passing_queries(mid, p) + mid <= n:
            lo = mid
        else:
            hi = mid - 1
    return float(ordered[n - lo])


#: LoadGen's own name of each rule, in its detail log, and how we say it was missed.
LOADGEN_RULES = {"result_min_duration_met": "min duration not met",
                 "result_min_queries_met": "min queries not met",
                 "result_perf_constraints_met": "latency bound not met",
                 "early_stopping_met": "early stopping not satisfied"}


@dataclass(frozen=True)
class LoadgenVerdict:
    """LoadGen's judgement of one test: VALID, or INVALID with the rules it missed."""

    valid: bool
    shortfalls: tuple[str, ...] = ()
    #: whether the latency bound was met (LoadGen's performance constraints); None: not said
    bound_met: bool | None = None
    #: how many more queries LoadGen's early stopping asked for; None: it asked for none
    more_queries: int | None = None

    @classmethod
    def from_detail(cls, detail: Mapping[str, Any]) -> LoadgenVerdict:
        """The verdict in LoadGen's detail log (its ``key -> value`` records)."""
        missed = [text for key, text in LOADGEN_RULES.items() if detail.get(key) is False]
        more = None
        if detail.get("early_stopping_met") is False and detail.get("early_stopping_result"):
            said = " ".join(str(detail["early_stopping_result"]).split())
            missed[-1] += f" ({said})"
            found = _MORE_QUERIES.search(said)
            more = int(found.group(1)) if found else None
        bound = detail.get("result_perf_constraints_met")
        return cls(detail.get("result_validity") == "VALID", tuple(missed),
                   bound if isinstance(bound, bool) else None, more)

    @classmethod
    def all_of(cls, verdicts: Sequence[LoadgenVerdict]) -> LoadgenVerdict:
        """One verdict for tests run side by side (instances): VALID when every one was."""
        missed = tuple(dict.fromkeys(s for v in verdicts for s in v.shortfalls))
        return cls(all(v.valid for v in verdicts), missed)

    @property
    def too_few_queries(self) -> bool:
        """INVALID only for want of queries: the bound held, but the counts or early
        stopping needed a longer test (run longer; it says nothing of the rate)."""
        return not self.valid and self.bound_met is True

    def __str__(self) -> str:
        return "VALID" if self.valid else "INVALID: " + ("; ".join(self.shortfalls) or "?")


#: LoadGen's early-stopping note: "Would need to run at least 339 more queries, ..."
_MORE_QUERIES = re.compile(r"at least (\d+) more queries")


@dataclass(frozen=True)
class LatencyResult:
    """Percentiles from raw per-query latencies, in milliseconds."""

    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    stdev_ms: float
    count: int
    duration_s: float
    samples_per_query: int
    #: latency at percentiles 0, 1, ..., 100: the CDF, compact enough to log with the run
    cdf_ms: tuple[float, ...] = ()
    #: LoadGen's early-stopping p99 estimate; None below 662 queries (see the module doc)
    p99_early_stopping_ms: float | None = None
    #: the raw per-query latencies (ns) behind it, for pooling results of several processes
    latencies_ns: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: MLPerf LoadGen's verdict on the test; None where no LoadGen ran it (ensembles)
    loadgen: LoadgenVerdict | None = None

    PERCENTILES: ClassVar[tuple[int, ...]] = (50, 90, 95, 99)

    @classmethod
    def from_samples(cls, latencies_ns: list[int] | np.ndarray, *, duration_s: float,
                     samples_per_query: int, loadgen: LoadgenVerdict | None = None
                     ) -> LatencyResult:
        ms = np.asarray(latencies_ns, dtype=np.float64) / 1e6
        if ms.size == 0:
            raise ValueError("no latency samples")
        p50, p90, p95, p99 = np.percentile(ms, cls.PERCENTILES)
        return cls(float(p50), float(p90), float(p95), float(p99), float(ms.mean()),
                   float(ms.std(ddof=1)) if ms.size > 1 else 0.0, int(ms.size), duration_s,
                   samples_per_query, tuple(float(v) for v in np.percentile(ms, CDF_POINTS)),
                   early_stopping_estimate(ms, 0.99),
                   np.asarray(latencies_ns, dtype=np.int64), loadgen)

    @classmethod
    def pooled(cls, results: list[LatencyResult]) -> LatencyResult:
        """All queries of results measured at the same time (one per process): percentiles
        of the pooled latencies; the window is the longest, so throughput is all samples
        over it (at most the sum of the results' own throughputs)."""
        missing = [r for r in results if r.latencies_ns is None]
        if missing or not results:
            raise ValueError("pooling needs every result's raw latencies")
        verdicts = [r.loadgen for r in results if r.loadgen is not None]
        return cls.from_samples(np.concatenate([r.latencies_ns for r in results]),
                                duration_s=max(r.duration_s for r in results),
                                samples_per_query=results[0].samples_per_query,
                                loadgen=LoadgenVerdict.all_of(verdicts) if verdicts else None)

    @property
    def samples(self) -> int:
        """Samples served in the measured part."""
        return self.count * self.samples_per_query

    @property
    def throughput_samples_per_s(self) -> float:
        return self.samples / self.duration_s if self.duration_s else 0.0

    def metrics(self, prefix: str) -> dict[str, float]:
        """``{prefix}/latency_p99_ms`` and friends; the early-stopping p99 when there is one
        (``query_count`` says how many queries every percentile rests on)."""
        early = ({} if self.p99_early_stopping_ms is None else
                 {f"{prefix}/{LATENCY_P99_EARLY_STOPPING}": self.p99_early_stopping_ms})
        return {
            **early,
            f"{prefix}/{LATENCY_P50}": self.p50_ms,
            f"{prefix}/{LATENCY_P90}": self.p90_ms,
            f"{prefix}/{LATENCY_P95}": self.p95_ms,
            f"{prefix}/{LATENCY_P99}": self.p99_ms,
            f"{prefix}/{LATENCY_MEAN}": self.mean_ms,
            f"{prefix}/{LATENCY_STDEV}": self.stdev_ms,
            f"{prefix}/{QUERY_COUNT}": float(self.count),
            f"{prefix}/{MEASURED_TIME}": self.duration_s,
            f"{prefix}/{THROUGHPUT}": self.throughput_samples_per_s,
        }
