"""Steady-state training speed of each adapter against a bare hand-written loop.

Same framework, model (lenet5), data (mnist5k), batch size and threads; the adapter's
``train_steps`` and a textbook loop alternate epoch by epoch in one process (ABBA order), so
both see the same machine noise. Prints median samples/s of each and the adapter's tax in percent.

    .venv/bin/python benchmarks/harness_tax.py [--frameworks pytorch tensorflow] [--rounds 5]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import statistics
import time
from collections.abc import Callable

import numpy as np

from mlflow_dlaas.data import load_dataset
from mlflow_dlaas.frameworks import BuildOptions, get_framework
from mlflow_dlaas.models import get_model
from mlflow_dlaas.parallelism import ParallelismSettings

BATCH = 64
OPTIONS = BuildOptions("sgd", 0.01, 0.9, 0.0, seed=0, device="cpu")


def bare_pytorch(adapter, data) -> Callable[[np.ndarray, np.ndarray], None]:
    from mlflow_dlaas.frameworks.pytorch import build_module

    torch = adapter.torch
    model = build_module(torch, get_model("lenet5"), data.input_shape, data.num_classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def epoch(x: np.ndarray, y: np.ndarray) -> None:
        xs, ys = torch.from_numpy(x), torch.from_numpy(y)
        model.train()
        for i in range(0, len(xs), BATCH):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xs[i : i + BATCH]), ys[i : i + BATCH])
            loss.backward()
            opt.step()

    return epoch


def bare_tensorflow(adapter, data) -> Callable[[np.ndarray, np.ndarray], None]:
    from mlflow_dlaas.frameworks.tensorflow import build_keras

    tf = adapter.tf
    model = build_keras(tf, get_model("lenet5"), data.input_shape, data.num_classes)
    opt = tf.keras.optimizers.SGD(0.01, momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))

    def epoch(x: np.ndarray, y: np.ndarray) -> None:
        batches = tf.data.Dataset.from_tensor_slices((x.transpose(0, 2, 3, 1), y)).batch(BATCH)
        for xb, yb in batches:
            step(xb, yb)

    return epoch


def bare_mxnet(adapter, data) -> Callable[[np.ndarray, np.ndarray], None]:
    from mlflow_dlaas.frameworks.mxnet import build_gluon

    mx = adapter.mx
    net = build_gluon(mx, get_model("lenet5"), data.input_shape, data.num_classes)
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01,
                                                             "momentum": 0.9})
    loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()

    def epoch(x: np.ndarray, y: np.ndarray) -> None:
        xs, ys = mx.nd.array(x), mx.nd.array(y)
        for i in range(0, len(x), BATCH):
            with mx.autograd.record():
                loss = loss_fn(net(xs[i : i + BATCH]), ys[i : i + BATCH])
            loss.backward()
            trainer.step(min(BATCH, len(x) - i))
        mx.nd.waitall()

    return epoch


BARE = {"pytorch": bare_pytorch, "tensorflow": bare_tensorflow, "mxnet": bare_mxnet}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", nargs="+", default=list(BARE))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: default)")
    args = parser.parse_args()
    data = load_dataset("mnist5k")
    x, y = data.x_train, data.y_train
    for name in args.frameworks:
        adapter = get_framework(name)
        if importlib.util.find_spec(adapter.module) is None:
            print(f"{name}: not installed in this environment, skipped")
            continue
        adapter.load()
        adapter.configure_threads(ParallelismSettings(intra_op_threads=args.threads or None))
        trainer = adapter.build(get_model("lenet5"), data.input_shape, data.num_classes, OPTIONS)
        bare = BARE[name](adapter, data)
        runners = {"adapter": functools.partial(trainer.train_steps, x, y, BATCH),
                   "bare": functools.partial(bare, x, y)}
        for run in runners.values():  # warm-up: tracing, allocator, caches
            run()
        rates: dict[str, list[float]] = {k: [] for k in runners}
        for round_ in range(args.rounds):
            order = list(runners.items())
            for label, run in order if round_ % 2 == 0 else reversed(order):  # ABBA order
                t0 = time.perf_counter()
                run()
                rates[label].append(len(x) / (time.perf_counter() - t0))
        adapter_rate = statistics.median(rates["adapter"])
        bare_rate = statistics.median(rates["bare"])
        print(f"{name:10s} adapter {adapter_rate:8.0f} samples/s  bare {bare_rate:8.0f} samples/s  "
              f"tax {100 * (1 - adapter_rate / bare_rate):+6.2f} %  "
              f"(ranges {min(rates['adapter']):.0f}-{max(rates['adapter']):.0f} / "
              f"{min(rates['bare']):.0f}-{max(rates['bare']):.0f}, {args.rounds} rounds)")


if __name__ == "__main__":
    main()
