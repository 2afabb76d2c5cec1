"""MLPerf's scenarios over a predictor, run by MLPerf's own LoadGen (:mod:`loadgen`):
single-stream, multi-stream, offline and server (with dynamic batching); the server's
highest rate within a p99 bound is :mod:`capacity`'s.

Every scenario runs its warm-up queries first and apart (they also tell LoadGen how long a
query takes, so that it plans its test), then LoadGen issues queries until both the minimum
query count and the minimum duration are reached and judges the test VALID or INVALID. A
server or multi-stream test runs at least :data:`P99_MIN_QUERIES` queries, the fewest for
which LoadGen's early-stopping rule can accept a p99. Inputs are a numpy array or a
:class:`~mlflow_dlaas.backends.feed.Feed` (several named inputs), sliced alike. In
performance mode a query's samples are served from prepared batches of its size (the values
do not change the time; LoadGen checks no output here).

Co-located ensembles serve several streams at once in one process, which LoadGen (one test
per process) cannot drive: :func:`timed_single_stream` is their hand-written loop, checked
against LoadGen's single-stream in the tests.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends.served_model import Predictor
from mlflow_dlaas.inference.latency import LatencyResult, early_stopping_min_queries
from mlflow_dlaas.inference.loadgen import TestSpec, complete, run_test

#: Fewer queries than this cannot give LoadGen's early-stopping p99 (662).
P99_MIN_QUERIES = early_stopping_min_queries(0.99)


@dataclass(frozen=True)
class StoppingRule:
    """At least ``min_queries`` AND at least ``min_duration_s`` (both logged as params)."""

    min_queries: int = 100
    min_duration_s: float = 1.0
    warmup_queries: int = 10

    def done(self, queries: int, elapsed_s: float) -> bool:
        return queries >= self.min_queries and elapsed_s >= self.min_duration_s


def rule_shortfalls(label: str, result: LatencyResult) -> list[str]:
    """How ``result`` falls short of LoadGen's rules (empty when LoadGen judged it VALID)."""
    if result.loadgen is None or result.loadgen.valid:
        return []
    return [f"{label}: {s}" for s in result.loadgen.shortfalls] or [f"{label}: INVALID"]


class _Window:
    """Per-query latencies and the measured window, from the first query's start (or
    arrival) to the last one's completion."""

    def __init__(self) -> None:
        self.latencies_ns: list[int] = []
        self.first_ns: int | None = None
        self.last_ns = 0

    def record(self, start_ns: int, end_ns: int, queries: int = 1) -> None:
        self.first_ns = start_ns if self.first_ns is None else min(self.first_ns, start_ns)
        self.last_ns = max(self.last_ns, end_ns)
        self.latencies_ns.extend([end_ns - start_ns] * queries)

    @property
    def duration_s(self) -> float:
        return 0.0 if self.first_ns is None else (self.last_ns - self.first_ns) / 1e9


def _warm_up(predict: Predictor, x: Any, rule: StoppingRule) -> float:
    """Run the warm-up queries (at least one); the median seconds one took."""
    took = []
    for _ in range(max(1, rule.warmup_queries)):
        t0 = time.perf_counter_ns()
        predict(x)
        took.append((time.perf_counter_ns() - t0) / 1e9)
    return float(np.median(took))


#: LoadGen plans a test's query count from how long a query is expected to take; a plan
#: that expects slower queries than come ends before the minimum duration. The warm-up's
#: estimate is scaled by this margin, and a test that still ends short is run once more,
#: planned from the rate it measured with twice the margin (what a busy machine needs).
PLAN_MARGIN = 1.25


def _planned_test(attempt: Callable[[float], LatencyResult], seconds_per_query: float
                  ) -> LatencyResult:
    """``attempt(expected seconds per query)``, planned from the warm-up's time, and once
    more from the measured mean when LoadGen found the test shorter than its minimum."""
    result = attempt(max(seconds_per_query / PLAN_MARGIN, 1e-7))
    if result.loadgen is not None and "min duration not met" in result.loadgen.shortfalls:
        result = attempt(max(result.duration_s / result.count / (2 * PLAN_MARGIN), 1e-8))
    return result


def single_stream(predict: Predictor, x: Any, rule: StoppingRule, log_dir: Path
                  ) -> LatencyResult:
    """One query (of ``len(x)`` samples) at a time; LoadGen issues the next when one
    completes."""

    def attempt(expected_s: float) -> LatencyResult:
        window = _Window()

        def issue(samples: list[Any]) -> None:
            t0 = time.perf_counter_ns()
            predict(x)
            window.record(t0, time.perf_counter_ns())
            complete(samples)

        spec = TestSpec("single_stream", rule.min_queries, rule.min_duration_s,
                        expected_latency_s=expected_s)
        verdict = run_test(spec, issue, 1, log_dir)
        return LatencyResult.from_samples(window.latencies_ns, duration_s=window.duration_s,
                                          samples_per_query=len(x), loadgen=verdict)

    return _planned_test(attempt, _warm_up(predict, x, rule))


def timed_single_stream(predict: Predictor, x: Any, rule: StoppingRule) -> LatencyResult:
    """Single-stream without LoadGen, for streams served side by side in one process
    (ensembles): back to back until both the count and the duration are reached."""
    _warm_up(predict, x, rule)
    window = _Window()
    start = time.perf_counter_ns()
    while not rule.done(len(window.latencies_ns), (time.perf_counter_ns() - start) / 1e9):
        t0 = time.perf_counter_ns()
        predict(x)
        window.record(t0, time.perf_counter_ns())
    return LatencyResult.from_samples(window.latencies_ns, duration_s=window.duration_s,
                                      samples_per_query=len(x))


def _batches(data: Any, size: int) -> list[Any]:
    """Consecutive batches of ``size`` samples of ``data`` (repeating it when it is shorter)."""
    found = [data[i : i + size] for i in range(0, len(data) - size + 1, size)]
    return found or [data[np.resize(np.arange(len(data)), size)]]


def offline(predict: Predictor, data: Any, batch_size: int, rule: StoppingRule,
            log_dir: Path) -> LatencyResult:
    """All samples available at once: LoadGen issues them in one query and the system
    serves them in batches of ``batch_size``, back to back. ``rule.min_queries`` counts
    batches. A last part smaller than a batch is served first, outside the measured window,
    so that every measured query holds ``batch_size`` samples."""
    batches = _batches(data, batch_size)

    def attempt(expected_s: float) -> LatencyResult:
        window = _Window()

        def issue(samples: list[Any]) -> None:
            rest = len(samples) % batch_size
            if rest:
                predict(batches[0][:rest])
                complete(samples[:rest])
            for i, first in enumerate(range(rest, len(samples), batch_size)):
                t0 = time.perf_counter_ns()
                predict(batches[i % len(batches)])
                window.record(t0, time.perf_counter_ns())
                complete(samples[first : first + batch_size])

        spec = TestSpec("offline", rule.min_queries * batch_size, rule.min_duration_s,
                        expected_qps=batch_size / expected_s)
        verdict = run_test(spec, issue, len(data), log_dir)
        return LatencyResult.from_samples(window.latencies_ns, duration_s=window.duration_s,
                                          samples_per_query=batch_size, loadgen=verdict)

    return _planned_test(attempt, _warm_up(predict, batches[0], rule))


def multi_stream(predict: Predictor, data: Any, samples_per_query: int, rule: StoppingRule,
                 log_dir: Path, *, max_batch: int = 0) -> LatencyResult:
    """MLPerf multi-stream (LoadGen 1.1 and later): queries of ``samples_per_query`` samples
    issued back to back, each as soon as the previous one completed; latency per query (its
    p99 is the scenario's figure). The system serves a query's samples in batches of
    ``max_batch`` (0: the whole query at once; a model with a fixed batch size needs that)."""
    queries = _batches(data, samples_per_query)
    step = max_batch or samples_per_query
    parts = [[q[i : i + step] for i in range(0, samples_per_query, step)] for q in queries]

    def attempt(expected_s: float) -> LatencyResult:
        window = _Window()

        def issue(samples: list[Any]) -> None:
            query = parts[len(window.latencies_ns) % len(parts)]
            t0 = time.perf_counter_ns()
            for part in query:
                predict(part)
            window.record(t0, time.perf_counter_ns())
            complete(samples)

        spec = TestSpec("multi_stream", max(rule.min_queries, P99_MIN_QUERIES),
                        rule.min_duration_s, expected_latency_s=expected_s,
                        samples_per_query=samples_per_query)
        verdict = run_test(spec, issue, len(data), log_dir)
        return LatencyResult.from_samples(window.latencies_ns, duration_s=window.duration_s,
                                          samples_per_query=samples_per_query, loadgen=verdict)

    return _planned_test(attempt, _warm_up(lambda q: [predict(p) for p in q], parts[0], rule))


@dataclass(frozen=True)
class ServerResult:
    latency: LatencyResult  # from arrival to completion: queueing included
    target_qps: float
    achieved_qps: float
    mean_batch_size: float = 1.0  # queries served per model call (dynamic batching)

    @property
    def valid(self) -> bool:
        """LoadGen judged the test VALID (the bound, the counts, early stopping)."""
        return self.latency.loadgen is not None and self.latency.loadgen.valid


class _DynamicBatcher:
    """The server's one serving thread: queries in arrival order; with ``max_batch > 1``,
    once free it waits until ``max_batch`` queries are queued or the oldest has waited
    ``max_wait_s``, then serves every queued query (at most ``max_batch``) as one batch."""

    def __init__(self, predict: Predictor, pool: Any, max_batch: int, max_wait_s: float
                 ) -> None:
        self.predict, self.pool, self.max_batch = predict, pool, max_batch
        self.max_wait_ns = int(max_wait_s * 1e9)
        self.arrivals: queue.SimpleQueue[tuple[int, Any] | None] = queue.SimpleQueue()
        self.window = _Window()
        self.calls = 0
        self.error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="dlaas-server", daemon=True)
        self._thread.start()

    def issue(self, samples: list[Any]) -> None:
        now = time.perf_counter_ns()
        for sample in samples:
            self.arrivals.put((now, sample))

    def close(self) -> None:
        self.arrivals.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error

    def _next_batch(self) -> list[tuple[int, Any]]:
        first = self.arrivals.get()
        if first is None:
            self._closed = True
            return []
        batch = [first]
        while len(batch) < self.max_batch:
            wait_ns = first[0] + self.max_wait_ns - time.perf_counter_ns()
            try:
                item = (self.arrivals.get_nowait() if wait_ns <= 0
                        else self.arrivals.get(timeout=wait_ns / 1e9))
            except queue.Empty:
                break
            if item is None:
                self._closed = True
                break
            batch.append(item)
        return batch

    def _serve(self) -> None:
        while not self._closed:
            batch = self._next_batch()
            if not batch:
                continue
            if self.error is None:
                try:
                    self.predict(self.pool[: len(batch)])
                except BaseException as e:  # noqa: BLE001 - raised by close()
                    self.error = e
            done = time.perf_counter_ns()
            for arrived, _ in batch:
                self.window.record(arrived, done)
            self.calls += 1
            complete([sample for _, sample in batch])


def server(predict: Predictor, pool: Any, target_qps: float, rule: StoppingRule,
           log_dir: Path, *, p99_bound_ms: float = 0.0, seed: int = 0, max_batch: int = 1,
           max_wait_s: float = 0.0) -> ServerResult:
    """LoadGen's Server scenario: Poisson arrivals of one-sample queries at ``target_qps``,
    served by one thread (:class:`_DynamicBatcher`); latency runs from a query's arrival to
    the completion of its batch. ``p99_bound_ms`` is LoadGen's target latency (0: none, and
    only the counts and early stopping judge the test). ``pool`` holds at least
    ``max_batch`` samples."""
    if max_batch < 1 or len(pool) < max_batch:
        raise ValueError(f"max_batch must be in 1..{len(pool)}, got {max_batch}")
    _warm_up(predict, pool[:1], rule)
    for size in range(2, max_batch + 1):  # every batch shape once, before any timing
        predict(pool[:size])
    batcher = _DynamicBatcher(predict, pool, max_batch, max_wait_s)
    spec = TestSpec("server", max(rule.min_queries, P99_MIN_QUERIES), rule.min_duration_s,
                    target_qps=target_qps, target_latency_s=p99_bound_ms / 1000.0, seed=seed)
    try:
        verdict = run_test(spec, batcher.issue, len(pool), log_dir)
    finally:
        batcher.close()
    window = batcher.window
    result = LatencyResult.from_samples(window.latencies_ns, duration_s=window.duration_s,
                                        samples_per_query=1, loadgen=verdict)
    return ServerResult(result, target_qps, result.count / max(window.duration_s, 1e-9),
                        result.count / max(batcher.calls, 1))
