"""Replicates fold into median / IQR / mean / sd; batch-size keys fold into rows."""

from __future__ import annotations

import math

import pandas as pd

from mlflow_dlaas.report.aggregate import aggregate
from mlflow_dlaas.report.derived import add_energy, inference_rows


def test_replicates_differ_only_in_seed() -> None:
    rows = pd.DataFrame({
        "run_id": ["a", "b", "c", "d"], "entry": "train",
        "system": ["pytorch", "pytorch", "pytorch", "tensorflow"],
        "params.seed": ["1", "2", "3", "1"],
        "params.batch_size": ["32", "32", "64", "32"],
        "metrics.train_time_seconds": [1.0, 3.0, 7.0, 5.0],
    })
    stats = aggregate(rows, ["metrics.train_time_seconds", "metrics.absent"]).set_index("config")
    first = stats.iloc[0]
    assert first["run_ids"] == ["a", "b"] and first["runs"] == 2
    assert first["metrics.train_time_seconds|median"] == 2.0
    assert (first["metrics.train_time_seconds|q1"], first["metrics.train_time_seconds|q3"]) == (
        1.5, 2.5)
    assert math.isclose(first["metrics.train_time_seconds|sd"], math.sqrt(2))
    assert len(stats) == 3  # batch 64 and tensorflow are configurations of their own
    assert stats["metrics.absent|n"].tolist() == [0, 0, 0]
    assert stats["metrics.absent|median"].isna().all()


def test_batch_keys_become_rows_and_energy_is_per_prediction() -> None:
    runs = pd.DataFrame({
        "run_id": ["r"], "entry": "infer", "system": "onnxruntime",
        "metrics.offline/throughput_samples_per_second": [999.0],  # last batch only
        "metrics.offline/batch_1/throughput_samples_per_second": [100.0],
        "metrics.offline/batch_8/throughput_samples_per_second": [400.0],
        "metrics.offline/samples_total": [2000.0],
        "metrics.offline/cpu_package0_energy_joules": [10.0],
        "metrics.run/cpu_package0_energy_joules": [30.0],
        "metrics.load_time_seconds": [0.5],
    })
    rows = inference_rows(add_energy(runs))
    assert rows["batch_size"].tolist() == [1, 8]
    assert rows["metrics.offline/throughput_samples_per_second"].tolist() == [100.0, 400.0]
    assert rows["metrics.load_time_seconds"].tolist() == [0.5, 0.5]
    assert rows["metrics.energy_per_1000_predictions_joules"].tolist() == [5.0, 5.0]
    assert rows["metrics.whole_run_energy_joules"].tolist() == [30.0, 30.0]


def test_no_energy_counter_means_no_energy_not_zero() -> None:
    runs = pd.DataFrame({"run_id": ["r"], "entry": "infer", "system": "pytorch",
                         "metrics.offline/batch_1/throughput_samples_per_second": [1.0],
                         "metrics.offline/samples_total": [10.0]})
    rows = inference_rows(add_energy(runs))
    assert rows["metrics.energy_per_1000_predictions_joules"].isna().all()
    assert rows["metrics.whole_run_energy_joules"].isna().all()
