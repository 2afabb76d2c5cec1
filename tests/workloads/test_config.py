"""Training configs: precedence, validation, and the parallelism settings."""

from __future__ import annotations

import pytest

from mlflow_dlaas.config import TrainConfig
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.parallelism import ParallelismSettings, available_cores, parse_cores


def test_explicit_params_beat_the_preset_which_beats_defaults() -> None:
    config = TrainConfig.from_params({"framework": "pytorch", "preset": "caffe_lenet",
                                      "batch_size": "32", "intra_op_threads": "1"})
    assert config.batch_size == 32  # explicit
    assert config.weight_decay == 5e-4 and config.max_steps == 10_000  # preset
    assert config.epochs == 0  # the preset's budget is in steps
    assert config.seed == 0  # default
    assert config.parallelism.intra_op_threads == 1


def test_empty_values_mean_not_given() -> None:
    config = TrainConfig.from_params({"framework": "tensorflow", "batch_size": "",
                                      "cpu_affinity": ""})
    assert config.batch_size == 64 and config.parallelism.cpu_affinity is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"batch_size": "0"}, "batch_size must be > 0"),
        ({"batch_size": "-3"}, "batch_size must be > 0"),
        ({"learning_rate": "0"}, "learning_rate must be a finite number > 0"),
        ({"learning_rate": "nan"}, "learning_rate must be a finite number > 0"),
        ({"batch_size": "abc"}, "batch_size must be an integer"),
        ({"optimizer": "rmsprop"}, "optimizer must be one of sgd, adam"),
        ({"device": "tpu"}, "device must be one of cpu, cuda"),
        ({"bach_size": "3"}, "unknown training parameter.*bach_size"),
        ({"preset": "keras_mnist"}, "unknown preset 'keras_mnist'"),
        ({"epochs": "0", "max_steps": "0"}, "training needs a budget"),
        ({"max_steps": "3", "warmup_steps": "5"},
         "max_steps=3 measures fewer steps than the 5 unmeasured warm-up steps"),
        ({"intra_op_threads": "-1"}, "intra_op_threads must be >= 1"),
        ({"cpu_affinity": "0-999"}, "cpu_affinity .* names cores outside"),
        ({"cpu_affinity": "zero"}, "not a core list"),
        ({"jit_compile": "maybe"}, "jit_compile must be true or false"),
    ],
)
def test_bad_values_are_refused_with_how_to_fix(params: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_params({"framework": "pytorch", **params})


def test_more_threads_than_cores_is_a_warning_not_an_error() -> None:
    settings = ParallelismSettings(intra_op_threads=available_cores() + 3)
    (line,) = settings.oversubscription_warnings()
    assert "exceeds" in line


def test_core_lists() -> None:
    assert parse_cores("0-2,5") == (0, 1, 2, 5)


def test_params_round_trip_flat() -> None:
    config = TrainConfig.from_params({"framework": "pytorch", "cpu_affinity": "0"})
    params = config.as_params()
    assert params["cpu_affinity"] == "0" and params["intra_op_threads"] == ""
    assert "parallelism" not in params
