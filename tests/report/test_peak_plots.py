"""The fraction-of-peak figure: training runs' train phase, inference runs' offline batches."""

from __future__ import annotations

import pandas as pd

from mlflow_dlaas.report.peak_plots import fraction_of_peak, inference_fractions
from mlflow_dlaas.runs.schema import P99_LATENCY


def test_inference_fractions_divide_each_batchs_rate_by_the_runs_peak() -> None:
    runs = pd.DataFrame({
        "system": ["onnxruntime", "openvino"], "params.model": ["resnet50", "resnet50"],
        "metrics.cpu_peak_gflops_per_second": [100.0, 100.0],
        "metrics.model_forward_flops_per_sample": [4e9, 4e9],
        "metrics.offline/batch_1/throughput_samples_per_second": [5.0, 7.5],
        "metrics.offline/batch_8/throughput_samples_per_second": [10.0, None],
        "metrics.fraction_of_peak": [0.4, 0.3]})
    found = inference_fractions(runs)
    assert found.to_dict("records") == [
        {"workload": "resnet50 bs 1", "system": "onnxruntime", "fraction": 0.2},
        {"workload": "resnet50 bs 1", "system": "openvino", "fraction": 0.3},
        {"workload": "resnet50 bs 8", "system": "onnxruntime", "fraction": 0.4}]


def test_a_run_faster_than_its_peak_is_left_out() -> None:
    """Its worker logged no fraction (tag dlaas.peak says why): the peak was measured low."""
    runs = pd.DataFrame({
        "system": ["onnxruntime", "openvino"], "params.model": ["resnet50", "resnet50"],
        "metrics.cpu_peak_gflops_per_second": [100.0, 100.0],
        "metrics.model_forward_flops_per_sample": [4e9, 4e9],
        "metrics.offline/batch_8/throughput_samples_per_second": [30.0, 20.0],
        "metrics.fraction_of_peak": [None, 0.8]})
    assert inference_fractions(runs).to_dict("records") == [
        {"workload": "resnet50 bs 8", "system": "openvino", "fraction": 0.8}]


def test_without_any_fraction_the_figure_says_why() -> None:
    plot = fraction_of_peak(pd.DataFrame(), pd.DataFrame())
    assert plot.missing and "dlaas.peak" in plot.missing


def test_a_served_training_run_is_labelled_by_its_architecture() -> None:
    runs = pd.DataFrame({
        "system": ["mxnet"], "params.model": ["run-78b45c9c"], "params.architecture": ["lenet5"],
        "metrics.cpu_peak_gflops_per_second": [100.0],
        "metrics.model_forward_flops_per_sample": [1e9],
        "metrics.offline/batch_8/throughput_samples_per_second": [10.0],
        "metrics.fraction_of_peak": [0.1]})
    assert list(inference_fractions(runs)["workload"]) == ["lenet5 bs 8"]


def test_the_roofline_places_each_batch_by_its_intensity_and_rate() -> None:
    """Intensity = FLOPs / (activation bytes + weight bytes / batch); a larger batch shares
    the weights, so it sits further right."""
    from mlflow_dlaas.report.roofline import roofline, roofline_points

    runs = pd.DataFrame({
        "system": ["openvino"], "params.model": ["lenet5"],
        "metrics.model_forward_flops_per_sample": [1e6],
        "metrics.model_activation_bytes_per_sample": [1e5],
        "metrics.model_weight_bytes": [8e5],
        "metrics.cpu_peak_gflops_per_second": [70.0],
        "metrics.cpu_memory_bandwidth_gb_per_second": [16.0],
        "metrics.offline/batch_1/throughput_samples_per_second": [1000.0],
        "metrics.offline/batch_8/throughput_samples_per_second": [4000.0]})
    points = roofline_points(runs).set_index("batch")
    assert points.loc[1, "intensity"] == 1e6 / 9e5 and points.loc[8, "intensity"] == 5.0
    assert points.loc[8, "gflops"] == 4.0
    assert roofline(runs).png and roofline(pd.DataFrame()).missing


def test_settings_that_never_varied_apart_are_one_row_of_the_screening_figure() -> None:
    """Three runs where min_query_count and warmup_queries rose together: one row, said so,
    not two rows of the same +-0.87."""
    from mlflow_dlaas.report.resource_plots import _independent, correlation_heatmap

    runs = pd.DataFrame({
        "params.min_query_count": ["50", "100", "200"], "params.warmup_queries": ["5", "10", "20"],
        "params.batch_size": ["8", "4", "16"],
        f"metrics.{P99_LATENCY}": [1.0, 2.0, 3.0]})
    settings = {c.removeprefix("params."): pd.to_numeric(runs[c]) for c in runs
                if c.startswith("params.")}
    merged, confounded = _independent(settings)
    assert list(merged) == ["min_query_count = warmup_queries", "batch_size"]
    assert confounded == [("min_query_count", "warmup_queries")]
    plot = correlation_heatmap(runs)
    assert "min_query_count = warmup_queries" in plot.caption
