"""Architecture specs: shapes, parameter counts, clear errors."""

import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.models import MODELS, get_model


def test_lenet5_is_caffes_lenet() -> None:
    spec = get_model("lenet5")
    # Caffe's LeNet on MNIST: 20*26 + 50*501 + 500*801 + 10*501
    assert spec.parameter_count((1, 28, 28), 10) == 431_080
    assert spec.shapes((1, 28, 28), 10)[:5] == [(20, 24, 24), (20, 12, 12), (50, 8, 8),
                                                (50, 4, 4), (800,)]


def test_classifier_follows_the_number_of_classes() -> None:
    assert get_model("mlp").shapes((1, 8, 8), 7)[-1] == (7,)


def test_every_model_builds_on_mnist_and_cifar_sizes() -> None:
    for spec in MODELS.values():
        for shape in ((1, 28, 28), (3, 32, 32)):
            assert spec.shapes(shape, 10)[-1] == (10,)


def test_too_small_images_say_which_model_fits() -> None:
    with pytest.raises(ConfigError, match="needs larger images than 8x8.*mlp"):
        get_model("lenet5").shapes((1, 8, 8), 10)


def test_unknown_model_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown model 'resnet9'.*lenet5"):
        get_model("resnet9")


@pytest.mark.parametrize("name", ["lenet5", "resnet18", "mobilenet_v2"])
def test_the_training_memory_estimate_is_a_lower_bound_of_what_pytorch_holds(name: str) -> None:
    """What autograd keeps for the backward pass (parameters apart) is at least the spec's
    activation estimate: a refusal on it never turns away a batch that would fit."""
    torch = pytest.importorskip("torch", reason="checked against PyTorch's autograd")
    from mlflow_dlaas.backends import BuildOptions, get_framework
    from mlflow_dlaas.models.memory import training_memory

    adapter = get_framework("pytorch")
    adapter.load()
    spec = get_model(name)
    shape = spec.input_shape or (1, 28, 28)
    options = BuildOptions("sgd", 0.01, 0.9, 0.0, seed=0, device="cpu")
    trainer = adapter.build(spec, shape, spec.classes, options)
    weights = {p.untyped_storage().data_ptr() for p in trainer.model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        trainer.model(torch.zeros((2, *shape)))
    estimate = training_memory(spec, shape, spec.classes, 2, "sgd")
    assert sum(saved.values()) >= estimate.activations, (sum(saved.values()), estimate)
    assert estimate.parameters == spec.parameter_count(shape, spec.classes) * 3 * 4
