"""The instance layout: disjoint core blocks that fit the run's cores, pooled figures."""

from __future__ import annotations

import numpy as np
import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.instance_layout import instance_settings, layout
from mlflow_dlaas.inference.latency import LatencyResult
from mlflow_dlaas.parallelism import ParallelismSettings, available_cores


def test_instances_get_disjoint_consecutive_blocks_of_the_runs_cores() -> None:
    cores = tuple(range(available_cores()))
    if len(cores) < 2:
        pytest.skip("needs 2 cores")
    settings = ParallelismSettings(cpu_affinity=cores[:2])
    assert layout(2, 1, settings) == [(cores[0],), (cores[1],)]
    assert layout(2, 0, settings) == [(cores[0],), (cores[1],)]  # 0: split evenly
    one = instance_settings(settings, (cores[1],))
    assert one.cpu_affinity == (cores[1],) and one.intra_op_threads == 1
    assert instance_settings(ParallelismSettings(intra_op_threads=3), (0,)).intra_op_threads == 3


@pytest.mark.parametrize(("params", "message"), [
    ({"instances": 2, "cores_per_instance": 4096}, "needs 8192 cores, but the run has"),
    ({"instances": 1, "cores_per_instance": 1}, "cores_per_instance applies to instances > 1"),
    ({"instances": 2, "scenarios": "single_stream,server"}, "server cannot be"),
    ({"instances": 0}, "instances must be >= 1"),
], ids=["too-many-cores", "one-instance", "server", "zero"])
def test_a_layout_that_cannot_be_laid_out_is_refused_before_anything_loads(
        params: dict, message: str) -> None:
    if available_cores() < 2:
        pytest.skip("needs 2 cores")
    with pytest.raises(ConfigError, match=message):
        InferConfig.from_params({"runtime": "onnxruntime", **params})


def test_instances_beyond_the_cpu_affinity_are_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match="needs 2 cores, but the run has cpu_affinity 0"):
        InferConfig.from_params({"runtime": "pytorch", "instances": 2, "cpu_affinity": "0"})


def test_pooled_latencies_are_percentiles_of_every_query_over_the_longest_window() -> None:
    fast = LatencyResult.from_samples([1_000_000] * 90, duration_s=1.0, samples_per_query=4)
    slow = LatencyResult.from_samples([9_000_000] * 10, duration_s=2.0, samples_per_query=4)
    pooled = LatencyResult.pooled([fast, slow])
    assert pooled.count == 100
    assert pooled.p50_ms == pytest.approx(1.0) and pooled.p99_ms == pytest.approx(9.0)
    assert pooled.throughput_samples_per_s == pytest.approx(400 / 2.0)
    assert pooled.throughput_samples_per_s <= (fast.throughput_samples_per_s
                                               + slow.throughput_samples_per_s)
    assert np.array_equal(np.sort(pooled.latencies_ns), np.sort(np.concatenate(
        [fast.latencies_ns, slow.latencies_ns])))
