"""A textbook ResNet-50 training script in PyTorch, TensorFlow or MXNet, independent of
mlflow-dlaas (the benchmarks' reference at ImageNet size).

He et al.'s ResNet-50 written out by hand as torchvision lays it out (bottleneck blocks
[3, 4, 6, 3], stride in the 3x3 convolution, 25,557,032 parameters), in PyTorch modules,
Keras layers (channels last, a ``tf.function`` GradientTape step) or Gluon hybrid blocks
(hybridized with static allocation, run in MXNet's own virtualenv), 256 seeded random
3x224x224 images with random labels among 1,000 classes (as our ``synthetic_imagenet``),
SGD 0.01 momentum 0.9, ``--warmup_steps`` steps, then ``--steps`` timed steps of
``--batch_size``. Prints one JSON line: samples/s over the timed steps and the kernel's peak
RSS inside them (its high-water mark restarted where they begin), and the process's CPU time
over them.

    python benchmarks/bare/train_resnet50.py [--framework pytorch|tensorflow|mxnet] [--steps 10]
        [--batch_size 16] [--warmup_steps 2]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from kernel_peak import peak_rss_bytes, restart_peak

IMAGES, CLASSES, LR, MOMENTUM = 256, 1000, 0.01, 0.9
STAGES = (3, 4, 6, 3)
Step = Callable[[np.ndarray, np.ndarray], None]


def bottlenecks() -> Iterator[tuple[int, int, int]]:
    """(input channels, width, stride) of each bottleneck block in order; the block's output
    has 4 x width channels."""
    cin = 64
    for stage, blocks in enumerate(STAGES):
        width = 64 * 2**stage
        for index in range(blocks):
            yield cin, width, 2 if stage and not index else 1
            cin = width * 4


def torch_resnet50() -> Any:
    """He et al.'s ResNet-50 in PyTorch modules, torchvision's layout."""
    import torch
    from torch import nn

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

    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                               nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    layers += [Bottleneck(cin, width, stride) for cin, width, stride in bottlenecks()]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, CLASSES)]
    return nn.Sequential(*layers)


def pytorch_step() -> Step:
    """The PyTorch ResNet-50 and its SGD step."""
    import torch
    from torch import nn

    model = torch_resnet50()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    model.train()

    def step(xb: np.ndarray, yb: np.ndarray) -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(model(torch.from_numpy(xb)), torch.from_numpy(yb)).backward()
        opt.step()

    return step


def keras_resnet50() -> Any:
    """The same ResNet-50 in Keras layers, channels last."""
    import keras
    from keras import layers

    def bn(x):
        return layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)

    def bottleneck(x, width: int, stride: int):
        cout = width * 4
        y = layers.ReLU()(bn(layers.Conv2D(width, 1, use_bias=False)(x)))
        y = layers.ReLU()(bn(layers.Conv2D(width, 3, stride, "same", use_bias=False)(y)))
        y = bn(layers.Conv2D(cout, 1, use_bias=False)(y))
        if stride != 1 or x.shape[-1] != cout:
            x = bn(layers.Conv2D(cout, 1, stride, use_bias=False)(x))
        return layers.ReLU()(y + x)

    inputs = keras.Input((224, 224, 3))
    x = layers.ReLU()(bn(layers.Conv2D(64, 7, 2, "same", use_bias=False)(inputs)))
    x = layers.MaxPooling2D(3, 2, "same")(x)
    for _, width, stride in bottlenecks():
        x = bottleneck(x, width, stride)
    outputs = layers.Dense(CLASSES)(layers.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, outputs)


def tensorflow_step() -> Step:
    """The Keras ResNet-50 and its SGD step in a ``tf.function``."""
    import keras
    import tensorflow as tf

    model = keras_resnet50()
    opt = keras.optimizers.SGD(LR, momentum=MOMENTUM)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables, strict=True))

    def step(xb: np.ndarray, yb: np.ndarray) -> None:
        train(xb, yb)

    return step


def mxnet_step() -> Step:
    """The same ResNet-50 in Gluon hybrid blocks and its SGD step (MXNet 1.9)."""
    import mxnet as mx
    from mxnet import autograd, gluon
    from mxnet.gluon import nn

    def conv_bn(block: nn.HybridSequential, channels: int, kernel: int, stride: int = 1,
                relu: bool = True) -> None:
        block.add(nn.Conv2D(channels, kernel, stride, kernel // 2, use_bias=False),
                  nn.BatchNorm(momentum=0.9, epsilon=1e-5))
        if relu:
            block.add(nn.Activation("relu"))

    class Bottleneck(gluon.HybridBlock):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            with self.name_scope():
                self.body = nn.HybridSequential()
                conv_bn(self.body, width, 1)
                conv_bn(self.body, width, 3, stride)
                conv_bn(self.body, cout, 1, relu=False)
                self.down = nn.HybridSequential()
                if stride != 1 or cin != cout:
                    conv_bn(self.down, cout, 1, stride, relu=False)

        def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's name
            # Activation, as Gluon's model zoo writes it: F.relu has no oneDNN kernel in
            # MXNet 1.9, and its reorders held 1.7 GiB more and trained 6 % slower here
            out = self.body(x) + (self.down(x) if len(self.down) else x)
            return F.Activation(out, act_type="relu")

    net = nn.HybridSequential()
    conv_bn(net, 64, 7, 2)
    net.add(nn.MaxPool2D(3, 2, 1))
    for cin, width, stride in bottlenecks():
        net.add(Bottleneck(cin, width, stride))
    net.add(nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(CLASSES))
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": LR, "momentum": MOMENTUM})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step(xb: np.ndarray, yb: np.ndarray) -> None:
        data, label = mx.nd.array(xb), mx.nd.array(yb)
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(len(xb))
        loss.wait_to_read()  # MXNet's engine is asynchronous: the step ends here

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=("pytorch", "tensorflow", "mxnet"),
                        default="pytorch")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--warmup_steps", type=int, default=2)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    shape = (IMAGES, 224, 224, 3) if args.framework == "tensorflow" else (IMAGES, 3, 224, 224)
    x = rng.random(shape, dtype=np.float32)
    y = rng.integers(0, CLASSES, IMAGES)
    step = {"pytorch": pytorch_step, "tensorflow": tensorflow_step,
            "mxnet": mxnet_step}[args.framework]()

    def batch(i: int) -> None:
        start = (i * args.batch_size) % IMAGES
        step(x[start : start + args.batch_size], y[start : start + args.batch_size])

    for i in range(args.warmup_steps):
        batch(i)
    restart_peak()
    cpu0, t0 = os.times(), time.perf_counter()
    for i in range(args.steps):
        batch(i)
    seconds, cpu = time.perf_counter() - t0, os.times()
    print(json.dumps({"train_samples_per_second": args.steps * args.batch_size / seconds,
                      "train_cpu_seconds": cpu.user + cpu.system - cpu0.user - cpu0.system,
                      "train_peak_rss_bytes": peak_rss_bytes()}))


if __name__ == "__main__":
    main()
