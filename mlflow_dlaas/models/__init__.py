"""The architecture registry: every model any adapter can build."""

from __future__ import annotations

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.models.imagenet import IMAGENET_MODELS
from mlflow_dlaas.models.spec import (
    ArchitectureSpec,
    BatchNorm,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool,
    Layer,
    Pool2D,
    Residual,
)

MODELS: dict[str, ArchitectureSpec] = {
    spec.name: spec
    for spec in (
        ArchitectureSpec(
            "lenet5",
            (Conv2D(20, 5), Pool2D(2, 2), Conv2D(50, 5), Pool2D(2, 2), Flatten(),
             Dense(500, "relu"), Dense(10)),
            "Caffe's LeNet: conv20-pool-conv50-pool-fc500-relu-fc10",
        ),
        ArchitectureSpec(
            "mnist_cnn",
            (Conv2D(32, 5, padding=2, activation="relu"), Pool2D(2, 2),
             Conv2D(64, 5, padding=2, activation="relu"), Pool2D(2, 2), Flatten(),
             Dense(1024, "relu"), Dropout(0.5), Dense(10)),
            "GTDLBench's TensorFlow model: conv32-pool-conv64-pool-fc1024-dropout0.5-fc10",
        ),
        ArchitectureSpec(
            "cifar10_quick",
            (Conv2D(32, 5, padding=2, activation="relu"), Pool2D(3, 2),
             Conv2D(32, 5, padding=2, activation="relu"),
             Pool2D(3, 2, "avg"), Conv2D(64, 5, padding=2, activation="relu"),
             Pool2D(3, 2, "avg"), Flatten(), Dense(64), Dense(10)),
            "Caffe's CIFAR-10 quick: conv32-pool-conv32-pool-conv64-pool-fc64-fc10",
        ),
        ArchitectureSpec(
            "torch_mnist",
            (Conv2D(32, 5, activation="tanh"), Pool2D(3, 3), Conv2D(64, 5, activation="tanh"),
             Pool2D(2, 2), Flatten(), Dense(200, "tanh"), Dense(10)),
            "GTDLBench's Torch model: conv32-tanh-pool3-conv64-tanh-pool2-fc200-fc10",
        ),
        ArchitectureSpec(
            "mlp",
            (Flatten(), Dense(512, "relu"), Dense(256, "relu"), Dense(10)),
            "multi-layer perceptron: fc512-relu-fc256-relu-fc10, for any input size",
        ),
        *IMAGENET_MODELS,
    )
}


def get_model(name: str) -> ArchitectureSpec:
    """The spec named ``name``; the error lists the valid names."""
    try:
        return MODELS[name]
    except KeyError:
        raise ConfigError(
            f"unknown model {name!r}; choose one of: {', '.join(sorted(MODELS))}"
        ) from None


__all__ = ["MODELS", "ArchitectureSpec", "BatchNorm", "Conv2D", "Dense", "Dropout", "Flatten",
           "GlobalAvgPool", "Layer", "Pool2D", "Residual", "get_model"]
