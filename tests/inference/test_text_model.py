"""BERT-base served fresh, with random weights and synthetic text, on the runtimes that take
it: its FLOPs, the check against PyTorch, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.text_model import synthetic_text
from mlflow_dlaas.runs.schema import (
    FORWARD_FLOPS,
    FRACTION_OF_PEAK,
    OFFLINE_GFLOPS,
    PARAMETER_COUNT,
)
from tests.conftest import only_finished_run, skip_unless_installed
from tests.workloads.projects import mlflow_run

#: BertModel's default configuration with its pooler (bert-base-uncased's count).
BERT_BASE_PARAMETERS = 109_482_240
SEQUENCE = 16
QUICK = {"model": "bert_base", "sequence_length": SEQUENCE, "batch_sizes": "1,2",
         "scenarios": "single_stream,offline", "min_query_count": 5, "min_duration_s": 0.2,
         "warmup_queries": 2, "monitor_interval": 0.2}


def test_synthetic_text_is_seeded_ids_with_padding_after_at_least_half() -> None:
    data = synthetic_text(30_522, 128, seed=3)
    again = synthetic_text(30_522, 128, seed=3)
    ids, mask = data["input_ids"], data["attention_mask"]
    assert ids.shape == mask.shape == (64, 128) and ids.dtype == mask.dtype == np.int64
    assert np.array_equal(ids, again["input_ids"])
    lengths = mask.sum(1)
    assert lengths.min() >= 64 and lengths.max() <= 128 and len(set(lengths)) > 1
    assert ((ids == 0) == (mask == 0)).all()  # padding, and only padding, is id 0
    assert ids.max() < 30_522


@pytest.mark.parametrize(("params", "message"), [
    ({"runtime": "tensorflow"}, "bert_base is served on pytorch, onnxruntime, openvino, not "
                                "tensorflow"),
    ({"runtime": "mxnet"}, "not mxnet"),
    ({"runtime": "onnxruntime", "sequence_length": "513"},
     "sequence_length must be between 1 and 512"),
    ({"runtime": "pytorch", "input_shape": "3x32x32"}, "set -P sequence_length, not input_shape"),
])
def test_bert_base_on_what_cannot_serve_it_is_refused(params: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        InferConfig.from_params({"model": "bert_base", **params})


def test_an_image_models_run_carries_no_sequence_length() -> None:
    assert "sequence_length" not in InferConfig.from_params({"runtime": "pytorch"}).as_params()
    text = InferConfig.from_params({"runtime": "pytorch", "model": "bert_base"})
    assert text.as_params()["sequence_length"] == 128


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["pytorch", "onnxruntime"])
def test_bert_base_is_served_with_its_flops_and_checked_against_pytorch(
    tracking: str, runtime: str
) -> None:
    skip_unless_installed("torch", "transformers", *(["onnxruntime"] if runtime != "pytorch"
                                                     else []))
    out = mlflow_run(runtime, tracking, QUICK, entry="infer", timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    run = only_finished_run(tracking)
    params, metrics = run.data.params, run.data.metrics
    assert params["architecture"] == "bert_base"
    assert metrics[PARAMETER_COUNT] == BERT_BASE_PARAMETERS
    assert params["sequence_length"] == str(SEQUENCE)
    assert params["model_inputs"] == (f"input_ids:int64[{SEQUENCE}],"
                                      f"attention_mask:int64[{SEQUENCE}]")
    # 2 FLOPs per multiply-add: the 12 layers' projections and feed-forward at 16 tokens
    # (about 85 M multiply-adds a token), attention's two products and the pooler
    dense = 12 * (4 * 768 * 768 + 2 * 768 * 3072) * SEQUENCE
    attention = 12 * 2 * SEQUENCE * SEQUENCE * 768
    assert metrics[FORWARD_FLOPS] == pytest.approx(2 * (dense + attention + 768 * 768),
                                                   rel=1e-3)
    assert metrics[OFFLINE_GFLOPS] > 0 and 0 < metrics[FRACTION_OF_PEAK] <= 1
    assert metrics["equivalence/max_abs_error"] < 1e-3
    assert metrics["offline/batch_2/throughput_samples_per_second"] > 0
