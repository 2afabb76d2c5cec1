"""The ImageNet classifiers: torchvision's sizes, and FLOPs as PyTorch's own counter has them."""

import pytest

from mlflow_dlaas.models import get_model

#: torchvision's parameter counts at 1,000 classes (its model docs).
PUBLISHED = {"resnet18": 11_689_512, "resnet50": 25_557_032, "mobilenet_v2": 3_504_872}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_spec_has_torchvisions_parameter_count(name: str) -> None:
    spec = get_model(name)
    assert spec.input_shape == (3, 224, 224) and spec.classes == 1000
    assert spec.parameter_count(spec.input_shape, spec.classes) == PUBLISHED[name]


@pytest.mark.parametrize("name", ["lenet5", "cifar10_quick", "resnet18", "resnet50",
                                  "mobilenet_v2"])
def test_flops_are_what_torchs_counter_counts(name: str) -> None:
    """Forward and training (forward + backward) FLOPs per sample equal
    torch.utils.flop_counter's on the PyTorch build, batch 2. PyTorch's counter ignores
    groups in a convolution's backward pass (it counts a depthwise one as a full one), so for
    MobileNetV2 only the forward pass is compared."""
    torch = pytest.importorskip("torch", reason="the reference counter is PyTorch's")
    from torch.utils.flop_counter import FlopCounterMode

    from mlflow_dlaas.backends.pytorch.training import build_module

    spec = get_model(name)
    shape = spec.input_shape or (3, 32, 32)
    module = build_module(torch, spec, shape, spec.classes)
    x = torch.rand(2, *shape)
    forward = FlopCounterMode(display=False)
    with forward:
        module(x)
    assert forward.get_total_flops() == 2 * spec.forward_flops(shape, spec.classes)
    if name != "mobilenet_v2":
        training = FlopCounterMode(display=False)
        with training:
            module(x).sum().backward()
        assert training.get_total_flops() == 2 * spec.training_flops(shape, spec.classes)


def test_resnet50_is_four_gmacs_a_sample() -> None:
    spec = get_model("resnet50")
    assert round(spec.forward_flops((3, 224, 224), 1000) / 2e9, 2) == 4.09  # He et al.: 4.1


def test_a_block_whose_parts_disagree_is_refused() -> None:
    from mlflow_dlaas.errors import ConfigError
    from mlflow_dlaas.models.spec import ArchitectureSpec, Conv2D, Dense, Flatten, Residual

    spec = ArchitectureSpec("bad", (Residual((Conv2D(8, 3, padding=1),)), Flatten(),
                                    Dense(10)), "a block that changes channels, no shortcut")
    with pytest.raises(ConfigError, match="residual block 0 adds a \\(8, 8, 8\\) body to a "
                                          "\\(3, 8, 8\\) shortcut"):
        spec.shapes((3, 8, 8), 10)
