"""The headline metrics' names, units and older names (mlflow_dlaas.runs.schema)."""

from __future__ import annotations

import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.runs import schema
from mlflow_dlaas.tuning.spec import parse_spec


def test_every_headline_key_sorts_before_every_phase_section() -> None:
    """MLflow's run page orders metric sections by code point: the headline comes first."""
    phases = ("check/", "eval/", "load/", "offline/", "run/", "server/", "single_stream/",
              "system/", "train/", "validity/", "warmup/", "worker/", "ensemble/")
    for key in schema.LABELS:
        assert key.startswith("Headline/")
        assert all(key < phase for phase in phases), key


def test_an_earlier_versions_keys_are_read_under_the_current_names() -> None:
    old = {"final_test_accuracy": 0.97, "measured_peak_rss_bytes": 310e6,
           "run/peak_proc_rss_bytes": 400e6, "server/max_qps_within_p99_bound": 900.0,
           "test_time_seconds": 0.2}
    assert schema.current_metrics(old) == {
        "Headline/test_accuracy": 0.97, "Headline/peak_memory_megabytes": 310.0,
        "run/peak_proc_rss_megabytes": 400.0, "Headline/server_max_qps_within_p99_bound": 900.0,
        "test_time_seconds": 0.2}
    both = {"final_test_accuracy": 0.5, "Headline/test_accuracy": 0.9}
    assert schema.current_metrics(both) == {"Headline/test_accuracy": 0.9}


def test_the_inference_headline_is_one_point_of_each_scenario() -> None:
    logged = {"single_stream/batch_8/latency_p50_ms": 0.9,
              "single_stream/batch_1/latency_p50_ms": 0.13,
              "single_stream/batch_1/latency_p99_ms": 0.2,
              "offline/batch_1/throughput_samples_per_second": 7000.0,
              "offline/batch_32/throughput_samples_per_second": 25000.0,
              "offline/batch_64/throughput_samples_per_second": 24000.0,
              "multi_stream/latency_p99_ms": 3.0}
    assert schema.inference_headline(logged) == {
        "Headline/single_stream_p50_ms": 0.13, "Headline/single_stream_p99_ms": 0.2,
        "Headline/offline_samples_per_second": 25000.0, "Headline/multi_stream_p99_ms": 3.0}
    assert schema.inference_headline({}) == {}


@pytest.mark.parametrize(("metric", "unit", "factor"), [
    ("Headline/peak_memory_megabytes", "", 1.0),
    ("Headline/peak_memory_megabytes", "GiB", 2**30 / 1e6),
    ("Headline/peak_memory_megabytes", "MB", 1.0),
    ("single_stream/latency_p99_ms", "s", 1000.0),
    ("Headline/train_time_seconds", "ms", 0.001),
    ("Headline/test_accuracy", "%", 0.01),
])
def test_units_turn_into_the_metrics_own(metric: str, unit: str, factor: float) -> None:
    assert schema.unit_factor(metric, unit, "x") == pytest.approx(factor)


def test_a_unit_that_does_not_fit_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="unit 'gib' does not fit metric "
                                          "'Headline/train_time_seconds'"):
        schema.unit_factor("Headline/train_time_seconds", "GiB", "x")


def test_a_study_spec_takes_units_and_older_metric_names() -> None:
    spec = parse_spec({
        "name": "units", "frameworks": ["pytorch"], "search_space": {"batch_size": [16, 32]},
        "objectives": [{"metric": "final_test_accuracy", "direction": "maximize"}],
        "constraints": [{"metric": "peak_memory", "op": "<=", "value": "4GiB"},
                        {"metric": "train_time", "op": "<=", "value": "1500ms"}]})
    assert spec.objectives[0].metric == "Headline/test_accuracy"
    memory, time = spec.constraints
    assert (memory.metric, memory.value) == ("Headline/peak_memory_megabytes",
                                             pytest.approx(4 * 2**30 / 1e6))
    assert (time.metric, time.value) == ("Headline/train_time_seconds", 1.5)
