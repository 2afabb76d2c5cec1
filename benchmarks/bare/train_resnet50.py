"""A textbook PyTorch ResNet-50 training script, independent of mlflow-dlaas (the benchmarks'
reference at ImageNet size).

He et al.'s ResNet-50 written out by hand as torchvision lays it out (bottleneck blocks
[3, 4, 6, 3], stride in the 3x3 convolution, 25,557,032 parameters), 256 seeded random
3x224x224 images with random labels among 1,000 classes (as our ``synthetic_imagenet``),
SGD 0.01 momentum 0.9, ``--warmup_steps`` steps, then ``--steps`` timed steps of
``--batch_size``. Prints one JSON line: samples/s over the timed steps and the kernel's peak
RSS inside them (its high-water mark restarted where they begin).

    python benchmarks/bare/train_resnet50.py [--steps 10] [--batch_size 16] [--warmup_steps 2]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from kernel_peak import peak_rss_bytes, restart_peak
from torch import nn

IMAGES, CLASSES, LR, MOMENTUM = 256, 1000, 0.01, 0.9


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.down(x))


def resnet50() -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                               nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, blocks in enumerate((3, 4, 6, 3)):
        width = 64 * 2 ** stage
        for index in range(blocks):
            layers.append(Bottleneck(cin, width, 2 if stage and not index else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, CLASSES)]
    return nn.Sequential(*layers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--warmup_steps", type=int, default=2)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.random((IMAGES, 3, 224, 224), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, CLASSES, IMAGES))
    model = resnet50()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    model.train()

    def step(i: int) -> None:
        start = (i * args.batch_size) % IMAGES
        xb, yb = x[start : start + args.batch_size], y[start : start + args.batch_size]
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()

    for i in range(args.warmup_steps):
        step(i)
    restart_peak()
    t0 = time.perf_counter()
    for i in range(args.steps):
        step(i)
    seconds = time.perf_counter() - t0
    print(json.dumps({"train_samples_per_second": args.steps * args.batch_size / seconds,
                      "train_peak_rss_bytes": peak_rss_bytes()}))


if __name__ == "__main__":
    main()
