"""Each parallel-library setting against the framework's default, fresh processes, alternating.

LeNet-5 on the embedded MNIST sample, batch 64, one epoch after 5 warm-up steps, through the
training entry point (so each setting is applied to the measured worker and read back; a
setting not in force fails its run). Per round the default and the setting run in
alternating order (AB, BA, ...) so both see the same machine noise. Prints, per setting,
training samples/s and the train phase's peak RSS as ratios to the default (medians over
rounds, with the range), and how many runs were judged disturbed.

    .venv/bin/python benchmarks/libraries.py [--frameworks pytorch tensorflow mxnet]
        [--settings openmp_runtime=intel allocator=jemalloc ...] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

from pairs import Figures, _run_ours, alternate, median, mxnet_python

from mlflow_dlaas.runs.schema import TRAIN_THROUGHPUT

PARAMS = ["--epochs", "1", "--batch_size", "64", "--learning_rate", "0.01", "--momentum", "0.9",
          "--warmup_steps", "5", "--log_model", "false"]
#: The settings each framework can switch (TensorFlow uses no OpenMP).
SETTINGS = {
    "pytorch": ["openmp_runtime=gnu", "openmp_runtime=intel", "allocator=jemalloc",
                "allocator=tcmalloc", "onednn=off"],
    "tensorflow": ["allocator=jemalloc", "allocator=tcmalloc", "onednn=off"],
    "mxnet": ["openmp_runtime=intel", "allocator=jemalloc", "allocator=tcmalloc",
              "onednn=off"],
}
SPEED = "train_samples_per_second"


def _train(python: str, framework: str, setting: str | None) -> Figures:
    extra = ["--" + setting.split("=")[0], setting.split("=")[1]] if setting else []
    return _run_ours(python, "mlflow_dlaas.workloads.train",
                     ["--framework", framework, *PARAMS, *extra],
                     {SPEED: TRAIN_THROUGHPUT})


def _ratios(mine: list[Figures], base: list[Figures]) -> str:
    speed = [m.values[SPEED] / b.values[SPEED] for m, b in zip(mine, base, strict=True)]
    memory = [m.peak_rss_bytes / b.peak_rss_bytes for m, b in zip(mine, base, strict=True)]
    return (f"speed x{_med(speed):.3f} ({min(speed):.3f}-{max(speed):.3f})  "
            f"peak RSS x{_med(memory):.3f} ({min(memory):.3f}-{max(memory):.3f})")


def _med(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", nargs="+", default=list(SETTINGS))
    parser.add_argument("--settings", nargs="+", default=None,
                        help="name=value pairs (default: all a framework can switch)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for framework in args.frameworks:
        python = mxnet_python() if framework == "mxnet" else sys.executable
        if python is None:
            print(f"{framework}: skipped, no MXNet environment")
            continue
        for setting in args.settings or SETTINGS[framework]:
            mine, base = alternate(partial(_train, python, framework, setting),
                                   partial(_train, python, framework, None), args.rounds)
            disturbed = sum(f.validity != "valid" for f in mine + base)
            print(f"{framework:10s} {setting:22s} {_ratios(mine, base)}  default "
                  f"{median(base, SPEED):.0f} samples/s, "
                  f"{median(base, 'peak_rss_bytes'):.0f} MiB  ({args.rounds} rounds, "
                  f"{disturbed} of {2 * args.rounds} runs not valid)", flush=True)


if __name__ == "__main__":
    main()
