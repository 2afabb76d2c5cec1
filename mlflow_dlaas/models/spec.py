"""Framework-neutral architecture specs: layers every adapter builds natively."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mlflow_dlaas.errors import ConfigError

Activation = Literal["relu", "tanh", "none"]


@dataclass(frozen=True)
class Conv2D:
    """2-D convolution, square kernel, zero padding ``padding`` on each side."""

    filters: int
    kernel: int
    stride: int = 1
    padding: int = 0
    activation: Activation = "none"


@dataclass(frozen=True)
class Pool2D:
    """Max or average pooling, square window, no padding."""

    size: int
    stride: int
    kind: Literal["max", "avg"] = "max"


@dataclass(frozen=True)
class Flatten:
    """Channels-first flattening (C, H, W) -> C*H*W; adapters keep that order."""


@dataclass(frozen=True)
class Dense:
    units: int
    activation: Activation = "none"


@dataclass(frozen=True)
class Dropout:
    rate: float


Layer = Conv2D | Pool2D | Flatten | Dense | Dropout


@dataclass(frozen=True)
class ArchitectureSpec:
    """A named stack of layers; the last Dense gets ``num_classes`` units (logits)."""

    name: str
    layers: tuple[Layer, ...]
    description: str

    def shapes(self, input_shape: tuple[int, int, int], num_classes: int) -> list[tuple[int, ...]]:
        """Output shape after each layer for a (C, H, W) input; a clear error if too small."""
        shape: tuple[int, ...] = input_shape
        shapes = []
        for index, layer in enumerate(self.resolved(num_classes)):
            shape = _next_shape(self.name, index, layer, shape, input_shape)
            shapes.append(shape)
        return shapes

    def resolved(self, num_classes: int) -> tuple[Layer, ...]:
        """The layers with the classifier sized to ``num_classes``."""
        *body, head = self.layers
        if not isinstance(head, Dense):
            raise ConfigError(f"model {self.name}: the last layer must be Dense")
        return (*body, Dense(num_classes, head.activation))

    def parameter_count(self, input_shape: tuple[int, int, int], num_classes: int) -> int:
        """Trainable parameters (weights + biases), as every adapter must report."""
        count = 0
        shape: tuple[int, ...] = input_shape
        for layer, out in zip(self.resolved(num_classes), self.shapes(input_shape, num_classes),
                              strict=True):
            if isinstance(layer, Conv2D):
                count += layer.filters * (shape[0] * layer.kernel * layer.kernel + 1)
            elif isinstance(layer, Dense):
                count += layer.units * (shape[0] + 1)
            shape = out
        return count


def _next_shape(
    model: str, index: int, layer: Layer, shape: tuple[int, ...], input_shape: tuple[int, ...]
) -> tuple[int, ...]:
    if isinstance(layer, Conv2D | Pool2D):
        if len(shape) != 3:
            raise ConfigError(f"model {model}: layer {index} needs a (C, H, W) input")
        c, h, w = shape
        size = layer.kernel if isinstance(layer, Conv2D) else layer.size
        pad = layer.padding if isinstance(layer, Conv2D) else 0
        out_h = (h + 2 * pad - size) // layer.stride + 1
        out_w = (w + 2 * pad - size) // layer.stride + 1
        if out_h < 1 or out_w < 1:
            raise ConfigError(
                f"model {model} needs larger images than {input_shape[1]}x{input_shape[2]} "
                f"(layer {index} would have no output); use the mlp model for this dataset"
            )
        return (layer.filters if isinstance(layer, Conv2D) else c, out_h, out_w)
    if isinstance(layer, Flatten):
        total = 1
        for dim in shape:
            total *= dim
        return (total,)
    if isinstance(layer, Dense):
        if len(shape) != 1:
            raise ConfigError(f"model {model}: Dense layer {index} needs a Flatten before it")
        return (layer.units,)
    return shape
