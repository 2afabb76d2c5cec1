"""The curated metric set: headline figures and a few per-phase statistics are metrics, every
other statistic stays in summary.json."""

from __future__ import annotations

import pytest

from mlflow_dlaas.monitor.metrics import timeline_name
from mlflow_dlaas.runs.curation import (
    curated_phase_summary,
    curated_validity,
    phase_energy,
    phase_total,
    split_details,
)

SUMMARY = {
    "train/duration_seconds": 10.0, "train/peak_proc_rss_bytes": 5e8,
    "train/mean_proc_cpu_percent": 180.0, "train/p95_proc_cpu_percent": 199.0,
    "train/proc_cpu_seconds": 18.0, "train/mean_sys_cpu0_percent": 90.0,
    "train/cpu_package0_energy_joules": 300.0, "train/gpu0_energy_joules": 50.0,
    "eval/proc_cpu_seconds": 2.0, "run/mean_proc_cpu_percent": 150.0,
    "load/mean_proc_cpu_percent": 99.0, "load/proc_cpu_seconds": 1.0,
    "load/duration_seconds": 2.0, "run/duration_seconds": 30.0,
    "run/proc_cpu_seconds": 25.0,
}


def test_phases_keep_duration_peak_cpu_and_energy_only() -> None:
    kept = curated_phase_summary(SUMMARY)
    assert kept["train/peak_proc_rss_megabytes"] == 500.0  # 5e8 bytes, in MB as MLflow's own
    assert set(kept) == {"train/duration_seconds", "train/peak_proc_rss_megabytes",
                         "train/mean_proc_cpu_percent", "train/proc_cpu_seconds",
                         "train/cpu_package0_energy_joules", "train/gpu0_energy_joules",
                         "eval/proc_cpu_seconds", "run/proc_cpu_seconds",
                         "load/duration_seconds"}


def test_latency_details_and_per_batch_counts_leave_the_metric_list() -> None:
    values = {"single_stream/latency_p99_ms": 1.0, "single_stream/latency_p95_ms": 2.0,
              "single_stream/latency_stdev_ms": 0.1, "single_stream/query_count": 500.0,
              "single_stream/latency_p50_ms": 0.5}
    logged, details = split_details(values, stepped=True)
    assert set(logged) == {"single_stream/latency_p99_ms"}
    assert set(details) == {"single_stream/latency_p95_ms", "single_stream/latency_stdev_ms",
                            "single_stream/query_count", "single_stream/latency_p50_ms"}
    logged, details = split_details({"ensemble/model1_latency_p99_ms": 3.0,
                                     "ensemble/throughput_samples_per_second": 9.0})
    assert set(logged) == {"ensemble/throughput_samples_per_second"}
    logged, _ = split_details({"single_stream/batch_8/query_count": 500.0})
    assert logged == {"single_stream/batch_8/query_count": 500.0}


def test_measured_totals_sum_the_headline_phases() -> None:
    assert phase_total(SUMMARY, ("train", "eval"), "proc_cpu_seconds") == 20.0
    assert phase_total(SUMMARY, ("test",), "proc_cpu_seconds") is None
    assert phase_energy(SUMMARY, ("train",)) == 350.0
    assert phase_energy(SUMMARY, ("eval",)) is None


def test_the_worst_phase_other_processes_cores_is_the_validity_metric() -> None:
    figures = {"train/other_processes_cpu_cores": 0.1, "train/cpu_steal_fraction": 0.0,
               "eval/other_processes_cpu_cores": 0.3}
    assert curated_validity(figures) == {"validity/max_other_processes_cpu_cores": 0.3}
    assert curated_validity({}) == {}


@pytest.mark.parametrize(("key", "expected"), [
    ("sys_cpu_percent", ("system/cpu_utilization_percentage", 1.0)),
    ("gpu1_memory_used_bytes", ("system/gpu_1_memory_usage_megabytes", 1e-6)),
    ("proc_rss_bytes", ("system/process_tree_rss_megabytes", 1e-6)),
    ("sys_cpu7_percent", None),
    ("proc_cpu_seconds", None),
])
def test_timelines_use_mlflow_system_metric_names(key: str, expected: object) -> None:
    assert timeline_name(key) == expected
