"""Our reported peak memory against an independent bare script's, per framework and runtime.

Training (PyTorch, TensorFlow; MXNet in its own virtualenv when ``mlflow run projects/mxnet``
has built it): our run's ``measured_peak_rss_bytes`` (the train phase's peak) against the
kernel's peak RSS of ``bare/train_lenet.py``. Inference (PyTorch, TensorFlow, ONNX Runtime,
OpenVINO): the measured scenarios' peak against ``bare/infer_lenet.py``. Fresh processes,
alternating. Goal: within max(5 %, 20 MiB) of the bare script.

    .venv/bin/python benchmarks/memory_fidelity.py [--rounds 3] [--skip-training|--skip-inference]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from pairs import MIB, alternate, fresh_onnx, infer_pair, median, mxnet_python, spread, train_pair

GOAL_FRACTION, GOAL_MIB = 0.05, 20.0


def report(label: str, mine: list, theirs: list) -> None:
    ours, bare = median(mine, "peak_rss_bytes") / MIB, median(theirs, "peak_rss_bytes") / MIB
    allowed = max(GOAL_FRACTION * bare, GOAL_MIB)
    verdict = "within goal" if abs(ours - bare) <= allowed else "OUTSIDE goal"
    print(f"{label:24s} ours {ours:7.1f} MiB ({spread(mine, 'peak_rss_bytes')})  bare "
          f"{bare:7.1f} MiB ({spread(theirs, 'peak_rss_bytes')})  ratio {ours / bare:5.3f}  "
          f"diff {ours - bare:+6.1f} MiB  {verdict} (+-{allowed:.0f} MiB)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--skip-inference", action="store_true")
    args = parser.parse_args()
    import sys

    if not args.skip_training:
        pythons = {"pytorch": sys.executable, "tensorflow": sys.executable,
                   "mxnet": mxnet_python()}
        for framework, python in pythons.items():
            if python is None:
                print(f"train {framework}: skipped, no MXNet environment (run "
                      "`mlflow run projects/mxnet --env-manager virtualenv` once)")
                continue
            report(f"train {framework}", *alternate(*train_pair(framework, python),
                                                    args.rounds))
    if not args.skip_inference:
        with tempfile.TemporaryDirectory() as tmp:
            onnx = fresh_onnx(Path(tmp))
            for runtime in ("pytorch", "tensorflow", "onnxruntime", "openvino"):
                report(f"infer {runtime}", *alternate(*infer_pair(runtime, onnx),
                                                      args.rounds))


if __name__ == "__main__":
    main()
