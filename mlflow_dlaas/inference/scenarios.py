"""MLPerf LoadGen-style scenarios over a predictor: single-stream, multi-stream, offline,
server (with dynamic batching).

Every scenario runs its warm-up queries first and apart, then stops only when both the
minimum query count and the minimum duration are reached. Inputs are a numpy array or a
:class:`~mlflow_dlaas.inference.feed.Feed` (several named inputs), sliced alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlflow_dlaas.inference.latency import LatencyResult

#: Takes a batch (an array, or a Feed of several inputs) and returns the first output.
Predictor = Callable[[Any], np.ndarray]


@dataclass(frozen=True)
class StoppingRule:
    """At least ``min_queries`` AND at least ``min_duration_s`` (both logged as params)."""

    min_queries: int = 100
    min_duration_s: float = 1.0
    warmup_queries: int = 10

    def done(self, queries: int, elapsed_s: float) -> bool:
        return queries >= self.min_queries and elapsed_s >= self.min_duration_s


#: Fewer queries than this leave no sample above the 99th percentile: its p99 is a maximum.
P99_MIN_QUERIES = 100


def rule_shortfalls(label: str, result: LatencyResult, rule: StoppingRule) -> list[str]:
    """How ``result`` falls short of the scenario's own rules (empty when it met them)."""
    found = []
    if result.count < rule.min_queries:
        found.append(f"{label}: {result.count} queries < min_query_count {rule.min_queries}")
    if result.duration_s < rule.min_duration_s:
        found.append(f"{label}: {result.duration_s:.2f} s < min_duration_s "
                      f"{rule.min_duration_s:g}")
    if result.count < P99_MIN_QUERIES:
        found.append(f"{label}: p99 rests on {result.count} queries (< {P99_MIN_QUERIES})")
    return found


def _warm_up(predict: Predictor, x: Any, rule: StoppingRule) -> None:
    for _ in range(rule.warmup_queries):
        predict(x)


def single_stream(predict: Predictor, x: Any, rule: StoppingRule) -> LatencyResult:
    """One query (of ``len(x)`` samples) at a time; the next starts when one completes."""
    _warm_up(predict, x, rule)
    latencies: list[int] = []
    start = time.perf_counter_ns()
    while not rule.done(len(latencies), (time.perf_counter_ns() - start) / 1e9):
        t0 = time.perf_counter_ns()
        predict(x)
        latencies.append(time.perf_counter_ns() - t0)
    duration = (time.perf_counter_ns() - start) / 1e9
    return LatencyResult.from_samples(latencies, duration_s=duration, samples_per_query=len(x))


def _batches(data: Any, size: int) -> list[Any]:
    """Consecutive batches of ``size`` samples of ``data`` (repeating it when it is shorter)."""
    found = [data[i : i + size] for i in range(0, len(data) - size + 1, size)]
    return found or [data[np.resize(np.arange(len(data)), size)]]


def offline(predict: Predictor, data: Any, batch_size: int, rule: StoppingRule
            ) -> LatencyResult:
    """All samples available at once: batches back to back, cycling through ``data``."""
    batches = _batches(data, batch_size)
    _warm_up(predict, batches[0], rule)
    latencies: list[int] = []
    start = time.perf_counter_ns()
    while not rule.done(len(latencies), (time.perf_counter_ns() - start) / 1e9):
        t0 = time.perf_counter_ns()
        predict(batches[len(latencies) % len(batches)])
        latencies.append(time.perf_counter_ns() - t0)
    duration = (time.perf_counter_ns() - start) / 1e9
    return LatencyResult.from_samples(latencies, duration_s=duration, samples_per_query=batch_size)


def multi_stream(predict: Predictor, data: Any, samples_per_query: int, rule: StoppingRule,
                 *, max_batch: int = 0) -> LatencyResult:
    """MLPerf multi-stream (LoadGen 1.1 and later): queries of ``samples_per_query`` samples
    issued back to back, each as soon as the previous one completed; latency per query (its
    p99 is the scenario's figure). The system serves a query's samples in batches of
    ``max_batch`` (0: the whole query at once; a model with a fixed batch size needs that)."""
    queries = _batches(data, samples_per_query)
    step = max_batch or samples_per_query
    parts = [[q[i : i + step] for i in range(0, samples_per_query, step)] for q in queries]
    _warm_up(lambda query: [predict(part) for part in query], parts[0], rule)
    latencies: list[int] = []
    start = time.perf_counter_ns()
    while not rule.done(len(latencies), (time.perf_counter_ns() - start) / 1e9):
        query = parts[len(latencies) % len(parts)]
        t0 = time.perf_counter_ns()
        for part in query:
            predict(part)
        latencies.append(time.perf_counter_ns() - t0)
    duration = (time.perf_counter_ns() - start) / 1e9
    return LatencyResult.from_samples(latencies, duration_s=duration,
                                      samples_per_query=samples_per_query)


@dataclass(frozen=True)
class ServerResult:
    latency: LatencyResult  # from arrival to completion: queueing included
    target_qps: float
    achieved_qps: float
    mean_batch_size: float = 1.0  # queries served per model call (dynamic batching)


def server(predict: Predictor, pool: Any, target_qps: float, rule: StoppingRule, *,
           seed: int = 0, max_batch: int = 1, max_wait_s: float = 0.0) -> ServerResult:
    """Poisson arrivals of one-sample queries at ``target_qps``, served in arrival order by
    one worker. With ``max_batch > 1`` the worker batches dynamically: when it is free, it
    waits until ``max_batch`` queries are queued or the oldest has waited ``max_wait_s``,
    then serves every queued query (at most ``max_batch``) as one batch. Latency runs from a
    query's arrival to the completion of its batch. ``pool`` holds at least ``max_batch``
    samples."""
    if max_batch < 1 or len(pool) < max_batch:
        raise ValueError(f"max_batch must be in 1..{len(pool)}, got {max_batch}")
    _warm_up(predict, pool[:1], rule)
    for size in range(2, max_batch + 1):  # every batch shape once, before any timing
        predict(pool[:size])
    rng = np.random.default_rng(seed)
    count = max(rule.min_queries, int(np.ceil(rule.min_duration_s * target_qps)))
    arrivals_s = np.cumsum(rng.exponential(1.0 / target_qps, count))
    while arrivals_s[-1] < rule.min_duration_s:  # the last query is issued after the minimum
        more = rng.exponential(1.0 / target_qps, max(16, count // 4))
        arrivals_s = np.concatenate((arrivals_s, arrivals_s[-1] + np.cumsum(more)))
    count = len(arrivals_s)
    arrivals_ns = (arrivals_s * 1e9).astype(np.int64)
    latencies = np.empty(count, dtype=np.int64)
    calls, first = 0, 0
    start = time.perf_counter_ns()

    def sleep_until(offset_ns: int) -> None:
        wait_ns = start + offset_ns - time.perf_counter_ns()
        if wait_ns > 0:
            time.sleep(wait_ns / 1e9)

    while first < count:
        sleep_until(int(arrivals_ns[first]))
        if max_batch > 1:  # the batch closes when full or when the oldest has waited enough
            full_at = int(arrivals_ns[min(first + max_batch, count) - 1])
            sleep_until(min(full_at, int(arrivals_ns[first]) + int(max_wait_s * 1e9)))
        now = time.perf_counter_ns() - start
        arrived = int(np.searchsorted(arrivals_ns[first : first + max_batch], now, "right"))
        last = first + max(1, arrived)
        predict(pool[: last - first])
        done = time.perf_counter_ns() - start
        latencies[first:last] = done - arrivals_ns[first:last]
        first, calls = last, calls + 1
    duration = (time.perf_counter_ns() - start) / 1e9
    result = LatencyResult.from_samples(latencies, duration_s=duration, samples_per_query=1)
    return ServerResult(result, target_qps, count / duration, count / calls)


def max_rate_within_bound(predict: Predictor, pool: Any, p99_bound_ms: float,
                          start_qps: float, rule: StoppingRule, *, probes: int = 6,
                          seed: int = 0, max_batch: int = 1, max_wait_s: float = 0.0
                          ) -> tuple[float, list[ServerResult]]:
    """The highest Poisson rate whose p99 latency stayed within the bound, and every probe.

    From ``start_qps`` the rate doubles until the bound breaks (or halves until it holds),
    then ``probes`` bisection steps narrow the edge. The answer is the highest rate of all
    probes that met the bound (0.0 when none did): a noisy probe can never make it lower
    than a rate that was seen to meet it."""
    tried: list[ServerResult] = []

    def meets(rate: float) -> bool:
        result = server(predict, pool, rate, rule, seed=seed, max_batch=max_batch,
                        max_wait_s=max_wait_s)
        tried.append(result)
        return result.latency.p99_ms <= p99_bound_ms

    low, high = 0.0, start_qps
    if meets(start_qps):
        while high <= 1e6:
            low, high = high, high * 2
            if not meets(high):
                break
    else:
        for _ in range(probes):
            high /= 2
            if meets(high):
                low, high = high, high * 2
                break
    for _ in range(probes if low > 0 else 0):
        middle = (low + high) / 2
        if meets(middle):
            low = middle
        else:
            high = middle
    best = max((r.target_qps for r in tried if r.latency.p99_ms <= p99_bound_ms), default=0.0)
    return best, tried
