"""``mlflow-dlaas demo --frameworks``: which frameworks and runtimes the main job measures."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mlflow_dlaas.cli import cli
from mlflow_dlaas.demo import DEMO_SYSTEMS, chosen_systems
from mlflow_dlaas.errors import ConfigError


def test_all_is_every_framework_and_runtime() -> None:
    assert chosen_systems(["all"]) == chosen_systems(None) == set(DEMO_SYSTEMS)
    assert set(DEMO_SYSTEMS) == {"pytorch", "tensorflow", "mxnet", "onnxruntime", "openvino"}


def test_a_runtime_comes_with_the_framework_whose_model_it_serves() -> None:
    assert chosen_systems(["pytorch", "onnxruntime"]) == {"pytorch", "onnxruntime"}
    with pytest.raises(ConfigError, match="onnxruntime serves the model pytorch trains; "
                                          "add pytorch"):
        chosen_systems(["tensorflow", "onnxruntime"])


def test_an_unknown_name_is_one_line_exit_2_naming_the_choices() -> None:
    done = CliRunner().invoke(cli, ["demo", "--frameworks", "pytorch,caffe"])
    assert done.exit_code == 2, done.output
    assert "unknown caffe; choose among pytorch, tensorflow, mxnet, onnxruntime, openvino" \
        in done.output
    assert "Traceback" not in done.output


def test_an_empty_list_is_refused_not_read_as_all() -> None:
    done = CliRunner().invoke(cli, ["demo", "--frameworks", " , "])
    assert done.exit_code == 2, done.output
    assert "--frameworks is empty: give some of pytorch" in done.output
