"""A textbook serving loop per runtime, independent of mlflow-dlaas (the reference): LeNet-5,
or ResNet-50 with ``--model resnet50``.

Single-stream: batch-1 queries one after another; offline: ``--offline_batch`` queries back to
back; each for at least ``--min_queries`` queries and 1 s after ``--warmup`` queries, timed with
perf_counter_ns. ONNX Runtime and OpenVINO serve ``--onnx FILE``; PyTorch and TensorFlow
build the model natively (ResNet-50: the hand-written one of ``train_resnet50.py``).
Prints one JSON line, with the kernel's peak RSS of the two scenarios (its high-water mark
restarted where they begin; the caller also reads the process's).

    python benchmarks/bare/infer_lenet.py --runtime onnxruntime --onnx model.onnx
    python benchmarks/bare/infer_lenet.py --runtime pytorch --model resnet50 --offline_batch 32 \
        --min_queries 20
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
from kernel_peak import peak_rss_bytes, restart_peak

MIN_SECONDS = 1.0
SHAPES = {"lenet5": (1, 28, 28), "resnet50": (3, 224, 224)}


def pytorch(_: str, model_name: str) -> Callable[[np.ndarray], np.ndarray]:
    import torch
    from torch import nn

    if model_name == "resnet50":
        from train_resnet50 import torch_resnet50

        model = torch_resnet50().eval()
    else:
        model = nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                              nn.Linear(500, 10)).eval()

    def predict(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return model(torch.from_numpy(x)).numpy()

    return predict


def tensorflow(_: str, model_name: str) -> Callable[[np.ndarray], np.ndarray]:
    import tensorflow as tf

    layers = tf.keras.layers
    if model_name == "resnet50":
        from train_resnet50 import keras_resnet50

        model = keras_resnet50()
    else:
        model = tf.keras.Sequential([
            tf.keras.Input((28, 28, 1)), layers.Conv2D(20, 5), layers.MaxPooling2D(2),
            layers.Conv2D(50, 5), layers.MaxPooling2D(2), layers.Flatten(),
            layers.Dense(500, activation="relu"), layers.Dense(10)])
    infer = tf.function(lambda x: model(x, training=False))
    return lambda x: infer(tf.constant(x.transpose(0, 2, 3, 1))).numpy()


def onnxruntime(path: str, _: str) -> Callable[[np.ndarray], np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda x: session.run(None, {name: x})[0]


def openvino(path: str, _: str) -> Callable[[np.ndarray], np.ndarray]:
    import openvino as ov

    compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()

    def predict(x: np.ndarray) -> np.ndarray:
        return request.infer({0: x})[compiled.output(0)]

    return predict


def latencies_ms(predict: Callable[[np.ndarray], np.ndarray], batches: list[np.ndarray],
                 min_queries: int, warmup: int) -> tuple[np.ndarray, float]:
    for i in range(warmup):
        predict(batches[i % len(batches)])
    out: list[int] = []
    start = time.perf_counter_ns()
    while len(out) < min_queries or (time.perf_counter_ns() - start) / 1e9 < MIN_SECONDS:
        t0 = time.perf_counter_ns()
        predict(batches[len(out) % len(batches)])
        out.append(time.perf_counter_ns() - t0)
    return np.array(out) / 1e6, (time.perf_counter_ns() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", required=True,
                        choices=("pytorch", "tensorflow", "onnxruntime", "openvino"))
    parser.add_argument("--onnx", default="")
    parser.add_argument("--model", choices=tuple(SHAPES), default="lenet5")
    parser.add_argument("--offline_batch", type=int, default=64)
    parser.add_argument("--min_queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    predict = {"pytorch": pytorch, "tensorflow": tensorflow, "onnxruntime": onnxruntime,
               "openvino": openvino}[args.runtime](args.onnx, args.model)
    batch = args.offline_batch
    data = np.random.default_rng(1).random((batch * 4, *SHAPES[args.model]), dtype=np.float32)
    restart_peak()
    single, _ = latencies_ms(predict, [data[:1]], args.min_queries, args.warmup)
    offline, seconds = latencies_ms(
        predict, [data[i : i + batch] for i in range(0, len(data), batch)], args.min_queries,
        args.warmup)
    print(json.dumps({"single_stream_p50_ms": float(np.percentile(single, 50)),
                      "offline_samples_per_second": len(offline) * batch / seconds,
                      "scenario_peak_rss_bytes": peak_rss_bytes()}))


if __name__ == "__main__":
    main()
