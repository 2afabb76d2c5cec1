"""Our reported peak memory against an independent bare script's, per framework and runtime.

Training (PyTorch, TensorFlow; MXNet in its own virtualenv when ``mlflow run projects/mxnet``
has built it): our run's ``Headline/peak_memory_megabytes`` (the train phase's peak) against the
kernel's peak RSS of ``bare/train_lenet.py``'s timed epochs. Inference (PyTorch, TensorFlow,
ONNX Runtime, OpenVINO): the measured scenarios' peak against ``bare/infer_lenet.py``'s.
Fresh processes, alternating. Goal: within max(5 %, 20 MiB) of the bare script. The whole
processes' peaks are printed beside (ours: the worker's ``run`` phase; bare: ``wait4``).

    .venv/bin/python benchmarks/memory_fidelity.py [--rounds 3] [--frameworks pytorch ...]
        [--epochs 3]   (LeNet-5's timed epochs)
        [--runtimes onnxruntime ...]   (an empty list skips that part)
        [--model resnet50]   (ResNet-50 at 224x224: training on all three frameworks;
                              serving on PyTorch, TensorFlow, ONNX Runtime, OpenVINO,
                              batch 1 and 32)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from pairs import (
    RESNET50_BARE_FRAMEWORKS,
    alternate,
    fresh_onnx,
    infer_pair,
    median,
    mxnet_python,
    spread,
    train_pair,
)

GOAL_FRACTION, GOAL_MIB = 0.05, 20.0


def report(label: str, mine: list, theirs: list) -> None:
    key, whole = "peak_rss_bytes", "process_peak_rss_bytes"
    ours, bare = median(mine, key), median(theirs, key)
    allowed = max(GOAL_FRACTION * bare, GOAL_MIB)
    verdict = "within goal" if abs(ours - bare) <= allowed else "OUTSIDE goal"
    print(f"{label:18s} measured window: ours {ours:6.1f} MiB ({spread(mine, key)})  bare "
          f"{bare:6.1f} MiB ({spread(theirs, key)})  ratio {ours / bare:5.3f}  diff "
          f"{ours - bare:+5.1f} MiB  {verdict} (+-{allowed:.0f} MiB)  |  whole process: ours "
          f"{median(mine, whole):6.1f} bare {median(theirs, whole):6.1f} MiB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frameworks", nargs="*", default=["pytorch", "tensorflow", "mxnet"])
    parser.add_argument("--runtimes", nargs="*",
                        default=["pytorch", "tensorflow", "onnxruntime", "openvino"])
    parser.add_argument("--model", choices=("lenet5", "resnet50"), default="lenet5")
    parser.add_argument("--epochs", type=int, default=3, help="LeNet-5's timed epochs")
    args = parser.parse_args()
    if args.frameworks:
        for framework in args.frameworks:
            if args.model == "resnet50" and framework not in RESNET50_BARE_FRAMEWORKS:
                print(f"train {framework} resnet50: skipped, the bare ResNet-50 is "
                      f"written in {' and '.join(RESNET50_BARE_FRAMEWORKS)} only")
                continue
            python = mxnet_python() if framework == "mxnet" else sys.executable
            if python is None:
                print(f"train {framework}: skipped, no MXNet environment (run "
                      "`mlflow run projects/mxnet --env-manager virtualenv` once)")
                continue
            pair = train_pair(framework, python, args.model, args.epochs)
            report(f"train {framework} {args.model}", *alternate(*pair, args.rounds))
    if args.runtimes:
        with tempfile.TemporaryDirectory() as tmp:
            onnx = fresh_onnx(Path(tmp), args.model)
            for runtime in args.runtimes:
                report(f"infer {runtime} {args.model}",
                       *alternate(*infer_pair(runtime, onnx, args.model), args.rounds))


if __name__ == "__main__":
    main()
