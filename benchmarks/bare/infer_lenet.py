"""A textbook LeNet-5 serving loop per runtime, independent of mlflow-dlaas (the reference).

Single-stream: batch-1 queries one after another; offline: batch-64 queries back to back;
each for at least 300 queries and 1 s after 20 warm-up queries, timed with perf_counter_ns.
ONNX Runtime and OpenVINO serve ``--onnx FILE``; PyTorch and TensorFlow build the model
natively. Prints one JSON line, with the kernel's peak RSS of the two scenarios (its
high-water mark restarted where they begin; the caller also reads the process's).

    python benchmarks/bare/infer_lenet.py --runtime onnxruntime --onnx model.onnx
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
from kernel_peak import peak_rss_bytes, restart_peak

MIN_QUERIES, MIN_SECONDS, WARMUP, OFFLINE_BATCH = 300, 1.0, 20, 64


def pytorch(_: str) -> Callable[[np.ndarray], np.ndarray]:
    import torch
    from torch import nn

    model = nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                          nn.Linear(500, 10)).eval()

    def predict(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return model(torch.from_numpy(x)).numpy()

    return predict


def tensorflow(_: str) -> Callable[[np.ndarray], np.ndarray]:
    import tensorflow as tf

    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)), layers.Conv2D(20, 5), layers.MaxPooling2D(2),
        layers.Conv2D(50, 5), layers.MaxPooling2D(2), layers.Flatten(),
        layers.Dense(500, activation="relu"), layers.Dense(10)])
    infer = tf.function(lambda x: model(x, training=False))
    return lambda x: infer(tf.constant(x.transpose(0, 2, 3, 1))).numpy()


def onnxruntime(path: str) -> Callable[[np.ndarray], np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda x: session.run(None, {name: x})[0]


def openvino(path: str) -> Callable[[np.ndarray], np.ndarray]:
    import openvino as ov

    compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()

    def predict(x: np.ndarray) -> np.ndarray:
        return request.infer({0: x})[compiled.output(0)]

    return predict


def latencies_ms(predict: Callable[[np.ndarray], np.ndarray], batches: list[np.ndarray]
                 ) -> tuple[np.ndarray, float]:
    for i in range(WARMUP):
        predict(batches[i % len(batches)])
    out: list[int] = []
    start = time.perf_counter_ns()
    while len(out) < MIN_QUERIES or (time.perf_counter_ns() - start) / 1e9 < MIN_SECONDS:
        t0 = time.perf_counter_ns()
        predict(batches[len(out) % len(batches)])
        out.append(time.perf_counter_ns() - t0)
    return np.array(out) / 1e6, (time.perf_counter_ns() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", required=True,
                        choices=("pytorch", "tensorflow", "onnxruntime", "openvino"))
    parser.add_argument("--onnx", default="")
    args = parser.parse_args()
    predict = {"pytorch": pytorch, "tensorflow": tensorflow, "onnxruntime": onnxruntime,
               "openvino": openvino}[args.runtime](args.onnx)
    data = np.random.default_rng(1).random((OFFLINE_BATCH * 4, 1, 28, 28), dtype=np.float32)
    restart_peak()
    single, _ = latencies_ms(predict, [data[:1]])
    offline, seconds = latencies_ms(
        predict, [data[i : i + OFFLINE_BATCH] for i in range(0, len(data), OFFLINE_BATCH)])
    print(json.dumps({"single_stream_p50_ms": float(np.percentile(single, 50)),
                      "offline_samples_per_second": len(offline) * OFFLINE_BATCH / seconds,
                      "scenario_peak_rss_bytes": peak_rss_bytes()}))


if __name__ == "__main__":
    main()
