"""Framework-neutral architecture specs: layers every adapter builds natively.

A spec is a tree of layers: a stack, where a :class:`Residual` holds two stacks whose outputs
are added. From it every adapter builds the same graph, so that parameter counts, shapes and
FLOPs are the spec's, equal on every framework.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from mlflow_dlaas.errors import ConfigError

Activation = Literal["relu", "relu6", "tanh", "none"]


@dataclass(frozen=True)
class Conv2D:
    """2-D convolution, square kernel, zero padding ``padding`` on each side; ``groups`` equal
    to the input channels and to ``filters`` is a depthwise convolution."""

    filters: int
    kernel: int
    stride: int = 1
    padding: int = 0
    activation: Activation = "none"
    groups: int = 1
    bias: bool = True


@dataclass(frozen=True)
class BatchNorm:
    """Batch normalisation over channels (epsilon 1e-5, running averages with momentum 0.9 in
    Keras' sense, 0.1 in PyTorch's); trainable scale and shift, then ``activation``."""

    activation: Activation = "none"


@dataclass(frozen=True)
class Pool2D:
    """Max or average pooling, square window. ``padding`` is only used after a non-negative
    activation (ResNet's stem), where zero padding and PyTorch's -inf padding agree."""

    size: int
    stride: int
    kind: Literal["max", "avg"] = "max"
    padding: int = 0


@dataclass(frozen=True)
class GlobalAvgPool:
    """Mean over height and width: (C, H, W) -> (C,)."""


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


@dataclass(frozen=True)
class Residual:
    """``activation(body(x) + shortcut(x))``; an empty ``shortcut`` is the identity."""

    body: tuple[Layer, ...]
    shortcut: tuple[Layer, ...] = ()
    activation: Activation = "none"


Layer = Conv2D | BatchNorm | Pool2D | GlobalAvgPool | Flatten | Dense | Dropout | Residual
Shape = tuple[int, ...]


@dataclass(frozen=True)
class ArchitectureSpec:
    """A named stack of layers; the last Dense gets ``num_classes`` units (logits).
    ``input_shape`` and ``classes`` are the model's own sizes where it has them (ImageNet's
    for the ResNets), used when no data set gives others."""

    name: str
    layers: tuple[Layer, ...]
    description: str
    input_shape: tuple[int, int, int] | None = None
    classes: int = 10

    def shapes(self, input_shape: tuple[int, int, int], num_classes: int) -> list[Shape]:
        """Output shape after each top-level layer for a (C, H, W) input; a clear error if
        the input is too small."""
        shape: Shape = input_shape
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
        """Trainable parameters (weights, biases, normalisation scales and shifts), as every
        adapter must report."""
        self.shapes(input_shape, num_classes)
        return _stack_cost(self.resolved(num_classes), input_shape)[0]

    def forward_flops(self, input_shape: tuple[int, int, int], num_classes: int) -> int:
        """Floating-point operations of one sample's forward pass: 2 per multiply-add of the
        convolutions and dense layers (what ``torch.utils.flop_counter`` counts; the
        normalisations, activations and pooling are left out, as there)."""
        self.shapes(input_shape, num_classes)
        return _stack_cost(self.resolved(num_classes), input_shape)[1]

    def activation_elements(self, input_shape: tuple[int, int, int], num_classes: int) -> int:
        """Values of one sample's forward pass that a training step holds for its backward
        pass, at the least (inside residual blocks too)."""
        self.shapes(input_shape, num_classes)
        return _stack_activations(self.resolved(num_classes), input_shape)

    def training_flops(self, input_shape: tuple[int, int, int], num_classes: int) -> int:
        """One sample's forward and backward pass: the backward pass of each convolution and
        dense layer computes the weight gradient and the input gradient (each as costly as
        the forward), except the first layer's input gradient, which nothing needs."""
        forward = self.forward_flops(input_shape, num_classes)
        first = _first_weighted_flops(self.resolved(num_classes), input_shape)
        return 3 * forward - first


def _next_shape(model: str, index: int, layer: Layer, shape: Shape, input_shape: Shape
                ) -> Shape:
    if isinstance(layer, Conv2D | Pool2D):
        if len(shape) != 3:
            raise ConfigError(f"model {model}: layer {index} needs a (C, H, W) input")
        c, h, w = shape
        size = layer.kernel if isinstance(layer, Conv2D) else layer.size
        out_h = (h + 2 * layer.padding - size) // layer.stride + 1
        out_w = (w + 2 * layer.padding - size) // layer.stride + 1
        if out_h < 1 or out_w < 1:
            raise ConfigError(
                f"model {model} needs larger images than {input_shape[1]}x{input_shape[2]} "
                f"(layer {index} would have no output); use the mlp model for this dataset"
            )
        if isinstance(layer, Conv2D) and (c % layer.groups or layer.filters % layer.groups):
            raise ConfigError(f"model {model}: layer {index} has {layer.groups} groups, which "
                              f"must divide its {c} input and {layer.filters} output channels")
        return (layer.filters if isinstance(layer, Conv2D) else c, out_h, out_w)
    if isinstance(layer, GlobalAvgPool):
        if len(shape) != 3:
            raise ConfigError(f"model {model}: layer {index} needs a (C, H, W) input")
        return (shape[0],)
    if isinstance(layer, Flatten):
        total = 1
        for dim in shape:
            total *= dim
        return (total,)
    if isinstance(layer, Dense):
        if len(shape) != 1:
            raise ConfigError(f"model {model}: Dense layer {index} needs a Flatten before it")
        return (layer.units,)
    if isinstance(layer, Residual):
        body = shortcut = shape
        for inner in layer.body:
            body = _next_shape(model, index, inner, body, input_shape)
        for inner in layer.shortcut:
            shortcut = _next_shape(model, index, inner, shortcut, input_shape)
        if body != shortcut:
            raise ConfigError(f"model {model}: residual block {index} adds a {body} body to "
                              f"a {shortcut} shortcut; they must have one shape")
        return body
    return shape


def next_shape(layer: Layer, shape: Shape) -> Shape:
    """The output shape of ``layer`` for an input of ``shape`` (already checked by
    :meth:`ArchitectureSpec.shapes`), for the adapters' builders."""
    return _next_shape("", 0, layer, shape, shape)


def _stack_cost(layers: tuple[Layer, ...], shape: Shape) -> tuple[int, int]:
    """(trainable parameters, forward FLOPs per sample) of a stack from input ``shape``."""
    parameters = flops = 0
    for layer in layers:
        out = next_shape(layer, shape)
        if isinstance(layer, Conv2D):
            weights = layer.filters * (shape[0] // layer.groups) * layer.kernel ** 2
            parameters += weights + (layer.filters if layer.bias else 0)
            flops += 2 * weights * out[1] * out[2]
        elif isinstance(layer, Dense):
            parameters += layer.units * (shape[0] + 1)
            flops += 2 * layer.units * shape[0]
        elif isinstance(layer, BatchNorm):
            parameters += 2 * shape[0]
        elif isinstance(layer, Residual):
            for stack in (layer.body, layer.shortcut):
                p, f = _stack_cost(stack, shape)
                parameters, flops = parameters + p, flops + f
        shape = out
    return parameters, flops


def _stack_activations(layers: tuple[Layer, ...], shape: Shape) -> int:
    """Elements of the layer outputs a stack from input ``shape`` must keep: those of the
    convolutions, dense layers, normalisations and pooling (a residual sum and its activation
    may be computed in place, a flatten is a view)."""
    total = 0
    for layer in layers:
        if isinstance(layer, Residual):
            total += _stack_activations(layer.body, shape)
            total += _stack_activations(layer.shortcut, shape)
        shape = next_shape(layer, shape)
        if not isinstance(layer, Residual | Flatten):
            total += math.prod(shape)
    return total


def _first_weighted_flops(layers: tuple[Layer, ...], shape: Shape) -> int:
    """Forward FLOPs of the first convolution or dense layer (whose input needs no gradient)."""
    for layer in layers:
        if isinstance(layer, Conv2D | Dense):
            return _stack_cost((layer,), shape)[1]
        if isinstance(layer, Residual):
            return 0  # no model here starts with a block: counted in full
        shape = next_shape(layer, shape)
    return 0
