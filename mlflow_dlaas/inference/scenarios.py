"""MLPerf LoadGen-style scenarios over a predictor: single-stream, offline, server.

Every scenario runs its warm-up queries first and apart, then stops only when both the
minimum query count and the minimum duration are reached.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mlflow_dlaas.inference.latency import LatencyResult

Predictor = Callable[[np.ndarray], np.ndarray]


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


def _warm_up(predict: Predictor, x: np.ndarray, rule: StoppingRule) -> None:
    for _ in range(rule.warmup_queries):
        predict(x)


def single_stream(predict: Predictor, x: np.ndarray, rule: StoppingRule) -> LatencyResult:
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


def offline(predict: Predictor, data: np.ndarray, batch_size: int, rule: StoppingRule
            ) -> LatencyResult:
    """All samples available at once: batches back to back, cycling through ``data``."""
    batches = [data[i : i + batch_size] for i in range(0, len(data) - batch_size + 1, batch_size)]
    if not batches:
        batches = [np.resize(data, (batch_size, *data.shape[1:]))]
    _warm_up(predict, batches[0], rule)
    latencies: list[int] = []
    start = time.perf_counter_ns()
    while not rule.done(len(latencies), (time.perf_counter_ns() - start) / 1e9):
        t0 = time.perf_counter_ns()
        predict(batches[len(latencies) % len(batches)])
        latencies.append(time.perf_counter_ns() - t0)
    duration = (time.perf_counter_ns() - start) / 1e9
    return LatencyResult.from_samples(latencies, duration_s=duration, samples_per_query=batch_size)


@dataclass(frozen=True)
class ServerResult:
    latency: LatencyResult  # from arrival to completion: queueing included
    target_qps: float
    achieved_qps: float


def server(predict: Predictor, x: np.ndarray, target_qps: float, rule: StoppingRule, *,
           seed: int = 0) -> ServerResult:
    """Poisson arrivals at ``target_qps``, served one at a time in arrival order."""
    _warm_up(predict, x, rule)
    rng = np.random.default_rng(seed)
    count = max(rule.min_queries, int(np.ceil(rule.min_duration_s * target_qps)))
    arrivals_s = np.cumsum(rng.exponential(1.0 / target_qps, count))
    latencies: list[int] = []
    start = time.perf_counter_ns()
    for arrival in arrivals_s:
        arrival_ns = start + int(arrival * 1e9)
        wait_s = (arrival_ns - time.perf_counter_ns()) / 1e9
        if wait_s > 0:
            time.sleep(wait_s)
        predict(x)
        latencies.append(time.perf_counter_ns() - arrival_ns)
    duration = (time.perf_counter_ns() - start) / 1e9
    result = LatencyResult.from_samples(latencies, duration_s=duration, samples_per_query=len(x))
    return ServerResult(result, target_qps, count / duration)


def max_rate_within_bound(predict: Predictor, x: np.ndarray, p99_bound_ms: float,
                          start_qps: float, rule: StoppingRule, *, probes: int = 6
                          ) -> tuple[float, list[ServerResult]]:
    """Highest Poisson rate whose p99 latency stays under the bound (bisection)."""
    low, high = 0.0, start_qps
    tried: list[ServerResult] = []
    while True:  # grow until the bound is broken (or the rate is absurd)
        result = server(predict, x, high, rule)
        tried.append(result)
        if result.latency.p99_ms > p99_bound_ms or high > 1e6:
            break
        low, high = high, high * 2
    for _ in range(probes):
        middle = (low + high) / 2
        result = server(predict, x, middle, rule)
        tried.append(result)
        if result.latency.p99_ms <= p99_bound_ms:
            low = middle
        else:
            high = middle
    return low, tried
