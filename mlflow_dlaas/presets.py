"""GTDLBench's per-framework default training settings, usable on any framework.

The seed study found that one framework's defaults do not carry over to another; a preset
lets a run apply, say, Caffe's LeNet settings to PyTorch and measure exactly that.
Learning-rate schedules (Caffe's "inv" policy, the CIFAR-10 step) are not reproduced: the
initial rate is used throughout.
"""

from __future__ import annotations

from typing import Any

from mlflow_dlaas.errors import ConfigError

PRESETS: dict[str, dict[str, Any]] = {
    "tensorflow_mnist": {"model": "mnist_cnn", "optimizer": "adam", "learning_rate": 1e-4,
                         "batch_size": 50, "max_steps": 20_000, "epochs": 0},
    "caffe_lenet": {"model": "lenet5", "optimizer": "sgd", "learning_rate": 0.01,
                    "momentum": 0.9, "weight_decay": 5e-4, "batch_size": 64,
                    "max_steps": 10_000, "epochs": 0},
    "torch_mnist": {"model": "torch_mnist", "optimizer": "sgd", "learning_rate": 0.05,
                    "momentum": 0.0, "batch_size": 10, "epochs": 20, "max_steps": 0},
    "theano_lenet": {"model": "lenet5", "optimizer": "sgd", "learning_rate": 0.1,
                     "momentum": 0.0, "batch_size": 500, "epochs": 200, "max_steps": 0},
    "caffe_cifar10_quick": {"model": "cifar10_quick", "optimizer": "sgd", "learning_rate": 0.001,
                            "momentum": 0.9, "weight_decay": 0.004, "batch_size": 100,
                            "max_steps": 5_000, "epochs": 0},
}


def get_preset(name: str) -> dict[str, Any]:
    """The settings of preset ``name``; the error lists the valid names."""
    try:
        return dict(PRESETS[name])
    except KeyError:
        raise ConfigError(
            f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}"
        ) from None
