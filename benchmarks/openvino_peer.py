"""Our OpenVINO figures held against OpenVINO's own ``benchmark_app``, a tool no one here
wrote: the same ONNX file (our fresh ResNet-50, exported by our exporter), the same precision,
the latency settings spelled out (one stream, synchronous calls: benchmark_app takes
``-nstreams`` / ``-nthreads`` only with ``-hint none``) and the same threads, in alternating
rounds (ABBA), each side in a fresh process.

Ours is the whole ``infer`` entry point (``python -m mlflow_dlaas.workloads.infer --runtime
openvino --model_uri FILE``, a throw-away SQLite store): its single-stream p50 latency at
batch 1 and its offline throughput at batch 32. benchmark_app's: its median latency of batch
1 and its throughput of batch 32. Goal: medians within 5 % of each other.

    .venv/bin/python benchmarks/openvino_peer.py [--precision f32] [--rounds 2] [--seconds 10]
        [--model resnet50] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
#: benchmark_app's names for our precisions
PRECISIONS = {"f32": "fp32", "bf16": "bf16"}
LATENCY = "latency median (ms), batch 1"
THROUGHPUT = "throughput (samples/s), batch 32"


def export(model: str, directory: Path) -> Path:
    """``model`` with random weights, as our fresh exporter writes it."""
    subprocess.run([sys.executable, "-m", "mlflow_dlaas.inference.sources.fresh", "--model",
                    model, "--out", str(directory)], check=True)
    return directory / "onnx" / "model.onnx"


def benchmark_app(onnx: Path, batch: int, precision: str, threads: int, seconds: float
                  ) -> dict[str, float]:
    """benchmark_app's median latency and throughput of ``batch``-sample calls."""
    done = subprocess.run(
        [str(BIN / "benchmark_app"), "-m", str(onnx), "-d", "CPU", "-hint", "none",
         "-api", "sync", "-nstreams", "1", "-nthreads", str(threads), "-infer_precision",
         precision, "-b", str(batch), "-t", str(max(round(seconds), 1))],
        capture_output=True, text=True, check=True)
    said = done.stdout + done.stderr  # its report goes to either, by version
    found = re.search(r"Median:\s+([\d.]+) (ms|us)", said)
    median = float(found.group(1)) / (1000.0 if found.group(2) == "us" else 1.0)
    fps = float(re.search(r"Throughput:\s+([\d.]+) FPS", said).group(1))
    return {LATENCY: median, THROUGHPUT: fps}


def ours(onnx: Path, precision: str, threads: int, seconds: float, store: Path
         ) -> dict[str, float]:
    """Our infer entry point's batch-1 p50 and batch-32 offline throughput."""
    import mlflow

    experiment = f"peer-{uuid.uuid4().hex[:12]}"  # one run each
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store / 'mlflow.db'}",
           "MLFLOW_EXPERIMENT_NAME": experiment, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "mlflow_dlaas.workloads.infer", "--runtime",
                    "openvino", "--model_uri", str(onnx), "--batch_sizes", "1,32",
                    "--scenarios", "single_stream,offline", "--precision",
                    PRECISIONS[precision], "--intra_op_threads", str(threads),
                    "--min_duration_s", str(seconds), "--min_query_count", "20"],
                   env=env, check=True, capture_output=True, text=True)
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    (run,) = mlflow.search_runs(experiment_names=[experiment], output_format="list")
    m = run.data.metrics
    return {LATENCY: m["single_stream/batch_1/latency_p50_ms"],
            THROUGHPUT: m["offline/batch_32/throughput_samples_per_second"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=sorted(PRECISIONS), default="f32")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dlaas-peer-") as folder:
        work = Path(folder)
        onnx = export(args.model, work / "model")
        theirs: list[dict[str, float]] = []
        mine: list[dict[str, float]] = []
        for i in range(args.rounds):
            order = ("theirs", "ours") if i % 2 == 0 else ("ours", "theirs")
            for side in order:
                if side == "theirs":
                    theirs.append({**benchmark_app(onnx, 1, args.precision, args.threads,
                                                   args.seconds),
                                   THROUGHPUT: benchmark_app(onnx, 32, args.precision,
                                                             args.threads, args.seconds)
                                   [THROUGHPUT]})
                else:
                    mine.append(ours(onnx, args.precision, args.threads, args.seconds, work))
                print(f"round {i + 1} {side}: "
                      + ", ".join(f"{k} {v:.2f}" for k, v in
                                  (theirs if side == "theirs" else mine)[-1].items()))
    print(f"{args.model}, {args.precision}, {args.threads} threads, one stream, "
          f"{args.rounds} rounds (medians):")
    for key in (LATENCY, THROUGHPUT):
        a = statistics.median(r[key] for r in mine)
        b = statistics.median(r[key] for r in theirs)
        print(f"  {key}: ours {a:.2f}, benchmark_app {b:.2f}, ratio {a / b:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
