"""A model URI is read once into what it names; every reader takes the parsed value."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.model_uri import parse_model_uri

RUN = "0123456789abcdef" * 2


@pytest.mark.parametrize(("text", "kind", "label"), [
    (f"runs:/{RUN}", "run", "run-01234567"),
    (f"runs:/{RUN}/", "run", "run-01234567"),
    (RUN, "run", "run-01234567"),
    (f"runs:/{RUN}/onnx/model.onnx", "run", "model.onnx"),
    ("models:/lenet/3", "registered", "lenet"),
    ("models:/lenet@champion", "registered", "lenet"),
    ("mlflow-artifacts:/1/abc/artifacts/model.onnx", "artifacts", "model"),
    ("s3://bucket/models/resnet50.onnx", "remote", "resnet50"),
    ("file:///models/bert.onnx", "file", "bert"),
    ("/models/resnet50.onnx", "file", "resnet50"),
    ("~/net.pt2", "file", "net"),
])
def test_every_form_is_read_into_what_it_names(text: str, kind: str, label: str) -> None:
    uri = parse_model_uri(text)
    assert (uri.kind, uri.label) == (kind, label)
    assert (uri.run_id == RUN) == (kind == "run")
    assert (uri.path is not None) == (kind == "file")


def test_a_file_uri_is_its_local_path() -> None:
    assert parse_model_uri("file:///m/a.onnx").path == Path("/m/a.onnx")
    assert parse_model_uri("~/a.onnx").path == Path("~/a.onnx").expanduser()


def test_only_a_run_has_a_run_id() -> None:
    assert parse_model_uri(f"runs:/{RUN}/model").require_run() == RUN
    with pytest.raises(ConfigError, match="is not runs:/<run id>"):
        parse_model_uri("models:/lenet/1").require_run()


def test_runs_are_named_after_the_model_they_serve() -> None:
    assert InferConfig.from_params({"runtime": "onnxruntime",
                                    "model_uri": "/m/resnet50.onnx"}).model == "resnet50"
