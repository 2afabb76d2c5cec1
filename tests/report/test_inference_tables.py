"""Inference tables that fit a screen: what differs in columns, the rest folded away."""

from __future__ import annotations

import pandas as pd

from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.report.formatting import setting_text
from mlflow_dlaas.report.tables import INFERENCE_COLUMNS, comparison_table


def test_settings_shared_by_every_row_leave_the_columns() -> None:
    rows = pd.DataFrame({
        "run_id": ["a", "b", "c"], "entry": "infer", "system": ["onnxruntime"] * 3,
        "batch_size": [1, 1, 1], "params.intra_op_threads": ["1", "2", "1"],
        "params.model_uri": ["/data/models/vision/classifier-v2.onnx"] * 3,
        "model_source": ["user_model"] * 3,
        "params.precision": ["fp32"] * 3, "params.seed": ["0", "0", "1"],
        "metrics.single_stream/latency_p99_ms": [1.0, 2.0, 1.2]})
    table = comparison_table("Inference", rows, INFERENCE_COLUMNS)
    assert table.headings[:4] == ["system", "batch_size", "intra_op_threads", "runs"]
    assert ("model_uri", "/data/models/vision/classifier-v2.onnx") in table.shared  # folded: whole
    assert ("precision", "fp32") in table.shared
    assert "model_uri" not in table.headings


def test_long_settings_are_shortened_to_what_tells_them_apart() -> None:
    assert setting_text("/home/someone/projects/models/resnet50-int8.onnx") == \
        "…/resnet50-int8.onnx"
    assert setting_text("runs:/" + "a" * 32) == "runs:/aaaaaaaa…"
    assert setting_text("") == "default"


def test_a_users_model_names_its_runs() -> None:
    config = InferConfig.from_params({"runtime": "onnxruntime",
                                      "model_uri": "file:///models/resnet50.onnx"})
    assert config.model == "resnet50"
    assert InferConfig.from_params({"runtime": "pytorch", "model_uri": "models:/tiny/3"}
                                   ).model == "tiny"


def test_an_unset_thread_count_shows_what_was_in_force() -> None:
    """MXNet's default on a 2-core x86 machine is one thread: the reader sees it; TensorFlow's
    read-back 0 ("its own default") says nothing more and is left out."""
    rows = pd.DataFrame({
        "run_id": ["a", "b", "c"], "entry": "train", "system": ["mxnet", "pytorch", "tensorflow"],
        "params.intra_op_threads": ["", "2", ""],
        "params.in_force_intra_op_threads": ["1", "2", "0"],
        "metrics.train_time_seconds": [1.0, 2.0, 1.5]})
    table = comparison_table("Training", rows, INFERENCE_COLUMNS)
    column = table.headings.index("intra_op_threads")
    assert [row[column] for row in table.cells] == ["default (1)", "2", "default"]
