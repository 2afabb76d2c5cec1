"""The fraction-of-peak figure: training runs' train phase, inference runs' offline batches."""

from __future__ import annotations

import pandas as pd

from mlflow_dlaas.report.peak_plots import fraction_of_peak, inference_fractions


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
