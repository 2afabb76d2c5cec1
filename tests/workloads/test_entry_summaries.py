"""The line an inference run ends with: its headline figures, not a bare "done"."""

from __future__ import annotations

from mlflow_dlaas.workloads.infer import InferenceResult


def test_an_inference_run_ends_with_the_figures_it_measured() -> None:
    result = InferenceResult("abc", "openvino", {
        "single_stream/batch_8/latency_p50_ms": 0.9, "single_stream/batch_1/latency_p50_ms": 0.13,
        "single_stream/batch_1/latency_p99_ms": 0.21, "offline/throughput_samples_per_second":
        24950.4, "server/max_qps_within_p99_bound": 2301.25, "server/latency_p99_ms": 4.5})
    assert result.summary() == (
        "run abc: openvino: single-stream p50 0.130 ms, p99 0.210 ms at batch 1, offline "
        "24,950 samples/s, server 2,301.2 queries/s within the p99 bound, server p99 4.50 ms")
    assert InferenceResult("abc", "onnxruntime", {}).summary() == \
        "run abc: onnxruntime: no headline figure"
