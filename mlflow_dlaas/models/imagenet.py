"""The ImageNet classifiers people deploy, in the spec language: torchvision's layouts, so
that each framework's build has torchvision's parameter count (random weights)."""

from __future__ import annotations

from mlflow_dlaas.models.spec import (
    ArchitectureSpec,
    BatchNorm,
    Conv2D,
    Dense,
    Dropout,
    GlobalAvgPool,
    Layer,
    Pool2D,
    Residual,
)

IMAGENET_INPUT = (3, 224, 224)
IMAGENET_CLASSES = 1000
STEM: tuple[Layer, ...] = (Conv2D(64, 7, 2, 3, bias=False), BatchNorm("relu"),
                           Pool2D(3, 2, "max", padding=1))


def _conv_bn(filters: int, kernel: int, stride: int = 1, activation: str = "relu",
             groups: int = 1) -> tuple[Layer, ...]:
    return (Conv2D(filters, kernel, stride, kernel // 2, groups=groups, bias=False),
            BatchNorm(activation))  # type: ignore[arg-type]


def _shortcut(cin: int, cout: int, stride: int) -> tuple[Layer, ...]:
    return () if stride == 1 and cin == cout else _conv_bn(cout, 1, stride, "none")


def _resnet(name: str, block_sizes: tuple[int, ...], bottleneck: bool) -> ArchitectureSpec:
    """He et al.'s ResNet; the stride sits in the 3x3 convolution (torchvision's v1.5)."""
    expansion = 4 if bottleneck else 1
    layers: list[Layer] = list(STEM)
    cin = 64
    for stage, blocks in enumerate(block_sizes):
        width = 64 * 2 ** stage
        for index in range(blocks):
            stride = 2 if stage and not index else 1
            if bottleneck:
                body = (*_conv_bn(width, 1), *_conv_bn(width, 3, stride),
                        *_conv_bn(width * expansion, 1, activation="none"))
            else:
                body = (*_conv_bn(width, 3, stride), *_conv_bn(width, 3, activation="none"))
            layers.append(Residual(body, _shortcut(cin, width * expansion, stride), "relu"))
            cin = width * expansion
    layers += [GlobalAvgPool(), Dense(IMAGENET_CLASSES)]
    kind = "bottleneck" if bottleneck else "basic"
    return ArchitectureSpec(name, tuple(layers),
                            f"He et al.'s {name} ({kind} blocks {list(block_sizes)}), "
                            "torchvision's layout", IMAGENET_INPUT, IMAGENET_CLASSES)


#: MobileNetV2's inverted residual settings: expansion t, channels c, repeats n, stride s.
MOBILENET_V2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                         (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def _mobilenet_v2() -> ArchitectureSpec:
    """Sandler et al.'s MobileNetV2 at width 1.0, torchvision's layout."""
    layers: list[Layer] = list(_conv_bn(32, 3, 2, "relu6"))
    cin = 32
    for expansion, cout, repeats, first_stride in MOBILENET_V2_SETTINGS:
        for index in range(repeats):
            stride = first_stride if index == 0 else 1
            hidden = cin * expansion
            block = (*(_conv_bn(hidden, 1, activation="relu6") if expansion != 1 else ()),
                     *_conv_bn(hidden, 3, stride, "relu6", groups=hidden),
                     *_conv_bn(cout, 1, activation="none"))
            layers += [Residual(block)] if stride == 1 and cin == cout else block
            cin = cout
    layers += [*_conv_bn(1280, 1, activation="relu6"), GlobalAvgPool(), Dropout(0.2),
               Dense(IMAGENET_CLASSES)]
    return ArchitectureSpec("mobilenet_v2", tuple(layers),
                            "Sandler et al.'s MobileNetV2 (width 1.0), torchvision's layout",
                            IMAGENET_INPUT, IMAGENET_CLASSES)


IMAGENET_MODELS = (_resnet("resnet18", (2, 2, 2, 2), bottleneck=False),
                   _resnet("resnet50", (3, 4, 6, 3), bottleneck=True),
                   _mobilenet_v2())
