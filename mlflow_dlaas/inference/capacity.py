"""The server's capacity: the highest Poisson arrival rate at which MLPerf's LoadGen judges
the Server scenario VALID under a p99 bound, found by a search LoadGen would accept.

Each probe is one LoadGen Server test at one rate (:func:`~.scenarios.server`), sized so
that LoadGen's rules can be met: at least the minimum query count (and never fewer than the
662 queries its early stopping needs for a p99) and the minimum duration. When LoadGen finds
the bound met but asks for more queries (its early-stopping rule: "Would need to run at
least N more queries"), the same rate is tested again with the queries it asked for, plus a
margin, while the time budget allows. A probe so ends in one of three ways:

- VALID: the rate is within capacity;
- INVALID over the bound (LoadGen's latency constraint failed): the rate is too high;
- INVALID for too few queries (the bound held, the budget ran out before LoadGen could
  judge): it bounds nothing, and the search stops there rather than read it as too high.

From the start rate the search doubles (or halves) to a bracket, then bisects the bracket
(geometric middle) until its ends are within ``precision``. The answer is the highest VALID
rate of all probes, with the bracket's lower end (that rate) and upper end (the lowest rate
over the bound), the p99 at the answer and the time the search took.

LoadGen's own ``TestMode.FindPeakPerformance`` does a search of this kind inside one test;
``benchmarks/server_capacity.py`` holds our answer against it on the same SUT.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from mlflow_dlaas.inference.scenarios import P99_MIN_QUERIES, ServerResult, StoppingRule

#: The search stops probing after this many seconds (each probe is a LoadGen test).
SEARCH_BUDGET_S = 60.0
#: The bracket is narrowed until its upper end is within this fraction of its lower end.
PRECISION = 0.05
#: A probe LoadGen found too short is run again with the queries it asked for, times this.
MORE_QUERIES_MARGIN = 1.2
#: At most this many longer runs of one rate.
MAX_LENGTHENINGS = 3

#: ``serve(rate, min_queries)``: one LoadGen Server test at ``rate`` queries/s.
Serve = Callable[[float, int], ServerResult]


@dataclass(frozen=True)
class Probe:
    """The last (longest) LoadGen test at one rate, and how often it was lengthened."""

    result: ServerResult
    lengthened: int = 0

    @property
    def rate(self) -> float:
        return self.result.target_qps

    @property
    def valid(self) -> bool:
        return self.result.valid

    @property
    def over_bound(self) -> bool:
        """INVALID because the latency bound failed: the rate is too high."""
        verdict = self.result.latency.loadgen
        return verdict is not None and not verdict.valid and not verdict.too_few_queries

    def reason(self) -> str:
        """LoadGen's verdict in words: VALID, over the bound, or too few queries."""
        verdict = self.result.latency.loadgen
        if verdict is None or verdict.valid:
            return "VALID"
        if verdict.too_few_queries:
            more = f"; LoadGen asked for {verdict.more_queries} more" \
                if verdict.more_queries else ""
            return (f"INVALID: too few queries ({self.result.latency.count}{more}): the "
                    "bound held; too short to judge")
        return f"INVALID: p99 over the bound ({'; '.join(verdict.shortfalls)})"


@dataclass(frozen=True)
class Capacity:
    """What the search found: every rate probed, the answer and its bracket."""

    bound_ms: float
    probes: tuple[Probe, ...]  # one per rate, in the order tried
    seconds: float
    stopped: str  # "" when the bracket narrowed to its precision, else why it stopped

    @property
    def best(self) -> Probe | None:
        """The highest VALID rate's probe (None when no rate was VALID)."""
        return max((p for p in self.probes if p.valid), key=lambda p: p.rate, default=None)

    @property
    def lowest_over_bound_qps(self) -> float | None:
        """The bracket's upper end: the lowest rate over the bound above the answer."""
        floor = self.best.rate if self.best else 0.0
        return min((p.rate for p in self.probes if p.over_bound and p.rate > floor),
                   default=None)

    def outcome(self) -> str:
        """One line for the run's tag: converged, stopped (why), or no rate met."""
        if self.best is None:
            rates = sorted(p.rate for p in self.probes)
            tried = f"{rates[0]:.3g} to {rates[-1]:.3g} queries/s" if rates else "no rate"
            return (f"no rate met p99 <= {self.bound_ms:g} ms: LoadGen judged every probe "
                    f"INVALID ({len(rates)} probes, {tried})"
                    + (f"; stopped: {self.stopped}" if self.stopped else ""))
        return f"stopped: {self.stopped}" if self.stopped else "converged"


#: ``report(probe, seconds_left)``: called after each probe.
ProbeReport = Callable[[Probe, float], None]


def find_capacity(serve: Serve, start_qps: float, bound_ms: float, rule: StoppingRule, *,
                  precision: float = PRECISION, budget_s: float = SEARCH_BUDGET_S,
                  report: ProbeReport | None = None) -> Capacity:
    """The highest rate LoadGen judges VALID under ``bound_ms`` (see the module doc)."""
    started = time.monotonic()
    deadline = started + budget_s
    probes: list[Probe] = []
    stopped = ""

    def fits(rate: float, queries: int) -> bool:
        planned = max(rule.min_duration_s, queries / rate)
        return not probes or time.monotonic() + planned <= deadline

    def judge(rate: float) -> bool | None:
        """True: VALID; False: over the bound; None: not judged (the budget)."""
        nonlocal stopped
        queries = max(rule.min_queries, P99_MIN_QUERIES)
        if not fits(rate, queries):
            stopped = stopped or "its time budget"
            return None
        result, lengthened = serve(rate, queries), 0
        while (result.latency.loadgen is not None and result.latency.loadgen.too_few_queries
               and lengthened < MAX_LENGTHENINGS):
            more = result.latency.loadgen.more_queries or queries
            queries = math.ceil((result.latency.count + more) * MORE_QUERIES_MARGIN)
            if not fits(rate, queries):
                break
            result, lengthened = serve(rate, queries), lengthened + 1
        probe = Probe(result, lengthened)
        probes.append(probe)
        if report is not None:
            report(probe, max(0.0, deadline - time.monotonic()))
        if probe.valid:
            return True
        if probe.over_bound:
            return False
        stopped = stopped or (f"too few queries at {rate:.3g} queries/s to judge within "
                              "its time budget")
        return None

    low, high = _bracket(judge, start_qps)
    while low is not None and high is not None and high > low * (1 + precision):
        middle = math.sqrt(low * high)
        answer = judge(middle)
        if answer is None:
            break
        low, high = (middle, high) if answer else (low, middle)
    return Capacity(bound_ms, tuple(probes), time.monotonic() - started, stopped)


def _bracket(judge: Callable[[float], bool | None], start: float
             ) -> tuple[float | None, float | None]:
    """A VALID rate and one over the bound twice or half as high (None where not found)."""
    answer = judge(start)
    if answer is None:
        return None, None
    step = 2.0 if answer else 0.5
    known, rate = start, start
    while True:
        rate *= step
        again = judge(rate)
        if again is None or rate > 1e6 or rate < 1e-3:
            return (known, None) if answer else (None, known)
        if again != answer:
            return (known, rate) if answer else (rate, known)
        known = rate
