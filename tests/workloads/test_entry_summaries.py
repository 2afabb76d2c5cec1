"""The line a run ends with: its headline figures, not a bare "done"."""

from __future__ import annotations

from mlflow_dlaas.workloads.infer import InferenceResult


def test_an_inference_run_ends_with_the_figures_it_measured() -> None:
    result = InferenceResult("abc", "openvino", {
        "single_stream/batch_8/latency_p50_ms": 0.9, "single_stream/batch_1/latency_p50_ms": 0.13,
        "single_stream/batch_1/latency_p99_ms": 0.21,
        "offline/batch_1/throughput_samples_per_second": 7000.0,
        "offline/batch_8/throughput_samples_per_second": 24950.4,
        "Headline/server_max_qps_within_p99_bound": 2301.25,
        "Headline/server_p99_at_max_qps_ms": 4.5, "Headline/peak_memory_megabytes": 310.26})
    assert result.summary() == (
        "run abc: openvino: single-stream p50 (smallest batch) 0.130 ms, single-stream p99 "
        "(smallest batch) 0.210 ms, offline throughput (best batch) 25,000 samples/s, server "
        "queries/s within the p99 bound 2,300, server p99 at that rate 4.50 ms, peak memory "
        "(measured phases) 310 MB")
    fixed_rate = InferenceResult("abc", "onnxruntime", {"server/latency_p99_ms": 4.5})
    assert fixed_rate.summary() == "run abc: onnxruntime: server p99 4.50 ms"
    assert InferenceResult("abc", "onnxruntime", {}).summary() == \
        "run abc: onnxruntime: no headline figure"


def test_a_training_run_ends_with_its_headline_figures() -> None:
    from mlflow_dlaas.workloads.training_run import TrainingResult

    result = TrainingResult("abc", {
        "Headline/test_accuracy": 0.9712, "Headline/train_time_seconds": 4.321,
        "Headline/train_samples_per_second": 3456.7, "Headline/peak_memory_megabytes": 415.94,
        "Headline/cpu_seconds": 8.5, "test_time_seconds": 0.1, "train_loss": 0.2})
    assert result.summary() == (
        "run abc: test accuracy 0.971, training time 4.32 s, training throughput 3,460 "
        "samples/s, peak memory (measured phases) 416 MB, CPU time (measured phases) 8.50 s")
