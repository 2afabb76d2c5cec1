"""Inference figures through our workload against an independent bare loop, fresh processes.

LeNet-5 per runtime (PyTorch and TensorFlow built natively, ONNX Runtime and OpenVINO on
one ONNX export); single-stream p50 at batch 1 and offline throughput at batch 64, at least
300 queries and 1 s after 20 warm-up queries on both sides, alternating in ABBA order.
Goal: within 3 % for every runtime.

    .venv/bin/python benchmarks/latency_fidelity.py [--runtimes onnxruntime pytorch] [--rounds 5]
        [--model resnet50]   (ResNet-50 at 224x224, random weights: offline at batch 32,
                              at least 20 queries after 5 warm-up queries)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from pairs import alternate, fresh_onnx, infer_pair, median, spread

RUNTIMES = ("pytorch", "tensorflow", "onnxruntime", "openvino")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", nargs="+", default=list(RUNTIMES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", choices=("lenet5", "resnet50"), default="lenet5")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        onnx = fresh_onnx(Path(tmp), args.model)
        for runtime in args.runtimes:
            mine, theirs = alternate(*infer_pair(runtime, onnx, args.model), args.rounds)
            line = [f"{runtime:12s}"]
            for key in ("single_stream_p50_ms", "offline_samples_per_second"):
                ours, bare = median(mine, key), median(theirs, key)
                line.append(f"{key} ours {ours:.4g} ({spread(mine, key)}) bare {bare:.4g} "
                            f"({spread(theirs, key)}) ours/bare {ours / bare:.3f}")
            print("  ".join(line), flush=True)


if __name__ == "__main__":
    main()
