"""Scenario semantics on a predictor whose service time we control."""

from __future__ import annotations

import time

import numpy as np
import pytest

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
    assert 20.0 <= best < 400.0
    assert len(tried) >= 4
