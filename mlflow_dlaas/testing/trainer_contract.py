"""The contract every training framework adapter keeps, built-in or plug-in (as Optuna ships
``optuna.testing``). A plug-in's own test::

    from mlflow_dlaas.data import load_dataset
    from mlflow_dlaas.testing.trainer_contract import check_trainer

    def test_my_framework_keeps_the_contract():
        check_trainer(MyAdapter(), load_dataset("digits"))

The checks build the shared model specs (LeNet-5, CIFAR-quick, the MLP, the ResNets and
MobileNetV2) with the adapter:
equal parameter counts, logits per sample, seeded starts, learning on real data, the step
limit honoured, the thread settings read back.
"""

from __future__ import annotations

import numpy as np

from mlflow_dlaas.backends import BuildOptions, FrameworkAdapter
from mlflow_dlaas.data import Dataset
from mlflow_dlaas.models import MODELS, get_model

SGD = BuildOptions("sgd", 0.05, 0.9, 0.0, seed=0, device="cpu")


def check_parameter_counts_match_the_spec(adapter: FrameworkAdapter) -> None:
    """Every model, the small ones at MNIST and CIFAR sizes, the ImageNet ones at their own
    (ResNet-50: 25,557,032 parameters on every framework)."""
    for name, spec in MODELS.items():
        for shape in [spec.input_shape] if spec.input_shape else [(1, 28, 28), (3, 32, 32)]:
            trainer = adapter.build(spec, shape, spec.classes, SGD)
            assert trainer.parameter_count() == spec.parameter_count(shape, spec.classes), (
                name, shape)


def check_outputs_are_logits_per_sample(adapter: FrameworkAdapter) -> None:
    x = np.random.default_rng(0).random((7, 3, 32, 32), dtype=np.float32)
    for name in ("lenet5", "cifar10_quick", "mlp", "resnet50", "mobilenet_v2"):
        out = adapter.build(get_model(name), (3, 32, 32), 10, SGD).predict(x, batch_size=3)
        assert out.shape == (7, 10) and np.isfinite(out).all(), name


def check_training_learns(adapter: FrameworkAdapter, data: Dataset) -> None:
    for options in (SGD, BuildOptions("adam", 1e-3, 0.0, 1e-4, seed=0, device="cpu")):
        trainer = adapter.build(get_model("mlp"), data.input_shape, data.num_classes, options)
        first = trainer.train_steps(data.x_train, data.y_train, 32)
        for _ in range(3):
            last = trainer.train_steps(data.x_train, data.y_train, 32)
        assert first.samples == len(data.x_train) and first.steps == -(-len(data.x_train) // 32)
        assert last.mean_loss < first.mean_loss, options.optimizer
        accuracy = (trainer.predict(data.x_test, 100).argmax(1) == data.y_test).mean()
        assert accuracy > 0.85, (options.optimizer, accuracy)


def check_max_steps_is_honoured(adapter: FrameworkAdapter, data: Dataset) -> None:
    trainer = adapter.build(get_model("mlp"), data.input_shape, data.num_classes, SGD)
    stats = trainer.train_steps(data.x_train, data.y_train, 16, max_steps=3)
    assert stats.steps == 3 and stats.samples == 48


def check_same_seed_same_initial_outputs(adapter: FrameworkAdapter) -> None:
    x = np.random.default_rng(1).random((4, 1, 28, 28), dtype=np.float32)
    a = adapter.build(get_model("lenet5"), (1, 28, 28), 10, SGD).predict(x, 4)
    b = adapter.build(get_model("lenet5"), (1, 28, 28), 10, SGD).predict(x, 4)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def check_thread_settings_are_read_back(adapter: FrameworkAdapter) -> None:
    in_force = adapter.threads_in_force()
    assert {"intra_op_threads", "inter_op_threads"} <= set(in_force)


CONTRACT = [
    check_parameter_counts_match_the_spec,
    check_outputs_are_logits_per_sample,
    check_same_seed_same_initial_outputs,
    check_thread_settings_are_read_back,
]
DATA_CONTRACT = [check_training_learns, check_max_steps_is_honoured]


def check_trainer(adapter: FrameworkAdapter, data: Dataset) -> None:
    """Every check of the contract, on ``adapter`` (loaded) and a small data set."""
    for check in CONTRACT:
        check(adapter)
    for check in DATA_CONTRACT:
        check(adapter, data)
