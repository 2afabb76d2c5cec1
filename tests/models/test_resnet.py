"""ResNet-18 from code: the ImageNet-size model of the inference benchmark."""

import pytest

from mlflow_dlaas.models.resnet import build_resnet18


def test_resnet18_has_the_published_size_and_output() -> None:
    torch = pytest.importorskip("torch", reason="ResNet-18 is built in PyTorch (extra: torch)")
    model = build_resnet18(torch).eval()
    assert sum(p.numel() for p in model.parameters()) == 11_689_512
    with torch.inference_mode():
        assert model(torch.zeros(2, 3, 224, 224)).shape == (2, 1000)
