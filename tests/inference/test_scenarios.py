"""Scenario semantics on a predictor whose service time we control."""

from __future__ import annotations

import time

import numpy as np
import pytest

from mlflow_dlaas.inference import latency as latency_module
from mlflow_dlaas.inference import scenarios
from mlflow_dlaas.inference.latency import LatencyResult


def sleeper(seconds: float):
    calls = []

    def predict(x: np.ndarray) -> np.ndarray:
        calls.append(len(x))
        time.sleep(seconds)
        return np.zeros((len(x), 10), dtype=np.float32)

    return predict, calls


def test_percentiles_come_from_raw_samples() -> None:
    result = LatencyResult.from_samples([i * 1_000_000 for i in range(1, 101)], duration_s=2.0,
                                        samples_per_query=4)
    assert result.p50_ms == pytest.approx(50.5)
    assert result.p99_ms == pytest.approx(99.01)
    assert result.count == 100 and result.throughput_samples_per_s == pytest.approx(200.0)
    assert set(result.metrics("single_stream")) >= {"single_stream/latency_p99_ms",
                                                    "single_stream/query_count"}


def test_stopping_needs_both_the_count_and_the_duration() -> None:
    predict, calls = sleeper(0.001)
    x = np.zeros((2, 1, 4, 4), dtype=np.float32)
    by_count = scenarios.single_stream(predict, x, scenarios.StoppingRule(50, 0.0, 3))
    assert by_count.count == 50 and len(calls) == 53  # warm-up kept apart
    by_time = scenarios.single_stream(predict, x, scenarios.StoppingRule(1, 0.3, 0))
    assert by_time.duration_s >= 0.3 and by_time.count > 1


def test_offline_cycles_batches_and_counts_samples() -> None:
    predict, calls = sleeper(0.0)
    data = np.zeros((40, 1, 4, 4), dtype=np.float32)
    result = scenarios.offline(predict, data, 8, scenarios.StoppingRule(20, 0.0, 0))
    assert result.samples_per_query == 8 and set(calls) == {8}


def test_server_latency_includes_queueing_when_overloaded() -> None:
    predict, _ = sleeper(0.01)  # capacity about 100 queries/s
    x = np.zeros((1, 1, 4, 4), dtype=np.float32)
    light = scenarios.server(predict, x, 20.0, scenarios.StoppingRule(30, 0.0, 0))
    heavy = scenarios.server(predict, x, 400.0, scenarios.StoppingRule(60, 0.0, 0))
    assert light.latency.p50_ms < 20
    assert heavy.latency.p99_ms > 3 * light.latency.p99_ms  # requests queue up
    assert heavy.achieved_qps < 150


def test_rate_search_finds_a_rate_under_the_bound() -> None:
    predict, _ = sleeper(0.005)
    x = np.zeros((1, 1, 4, 4), dtype=np.float32)
    best, tried = scenarios.max_rate_within_bound(predict, x, 30.0, 20.0,
                                                  scenarios.StoppingRule(40, 0.0, 0), probes=3)
    assert 0.0 < best < 400.0  # a loaded machine may fail the first probe: then it halves
    assert len(tried) >= 4


@pytest.mark.parametrize(("queries", "discarded"), [(2048, 172), (2116, 178), (7469, 685)])
def test_early_stopping_p90_matches_loadgen_summaries(queries: int, discarded: int) -> None:
    """LoadGen's summaries: 'Processed at least 64 queries (2048). Would discard 172 highest
    latency queries.' for the 90th percentile at 99 % confidence."""
    latencies = np.arange(queries, dtype=np.float64)
    assert latency_module.early_stopping_min_queries(0.9) == 64
    assert latency_module.early_stopping_estimate(latencies, 0.9) == queries - 1 - discarded


def test_a_short_run_has_no_early_stopping_p99_and_a_long_one_a_conservative_one() -> None:
    short = LatencyResult.from_samples(np.arange(1, 500) * 1_000_000, duration_s=1.0,
                                       samples_per_query=1)
    assert short.p99_early_stopping_ms is None
    assert "single_stream/latency_p99_early_stopping_ms" not in short.metrics("single_stream")
    long = LatencyResult.from_samples(np.arange(1, 5001) * 1_000_000, duration_s=1.0,
                                      samples_per_query=1)
    assert long.p99_ms < long.p99_early_stopping_ms <= 5000.0
    assert long.metrics("x")["x/latency_p99_early_stopping_ms"] == long.p99_early_stopping_ms


def test_multi_stream_measures_whole_queries_served_in_batches() -> None:
    predict, calls = sleeper(0.001)
    data = np.zeros((32, 1, 4, 4), dtype=np.float32)
    whole = scenarios.multi_stream(predict, data, 8, scenarios.StoppingRule(20, 0.0, 2))
    assert whole.samples_per_query == 8 and whole.count == 20 and set(calls) == {8}
    calls.clear()
    split = scenarios.multi_stream(predict, data, 8, scenarios.StoppingRule(20, 0.0, 0),
                                   max_batch=2)
    assert set(calls) == {2} and len(calls) == 80  # 4 model calls per query
    assert split.p50_ms > 3 * 1.0  # a query waits for all of its parts


def test_dynamic_batching_serves_queued_queries_together() -> None:
    predict, calls = sleeper(0.01)  # batch-1 capacity about 100 queries/s
    pool = np.zeros((8, 1, 4, 4), dtype=np.float32)
    rule = scenarios.StoppingRule(150, 0.0, 0)
    single = scenarios.server(predict, pool, 300.0, rule)
    calls.clear()
    batched = scenarios.server(predict, pool, 300.0, rule, max_batch=8, max_wait_s=0.005)
    assert batched.mean_batch_size > 2 and max(calls) <= 8
    assert batched.latency.p99_ms < single.latency.p99_ms / 3  # no queue that grows


def test_the_best_rate_is_never_below_a_rate_that_met_the_bound() -> None:
    predict, _ = sleeper(0.004)
    pool = np.zeros((1, 1, 4, 4), dtype=np.float32)
    best, tried = scenarios.max_rate_within_bound(predict, pool, 40.0, 2000.0,
                                                  scenarios.StoppingRule(30, 0.0, 0), probes=5)
    met = [r.target_qps for r in tried if r.latency.p99_ms <= 40.0]
    assert tried[0].target_qps == 2000.0 and tried[0].latency.p99_ms > 40.0  # halved down
    assert met and best == max(met)
