"""BERT-base for inference, built here with random weights: nothing is downloaded.

``python -m mlflow_dlaas.inference.text_model --model bert_base --sequence_length 128
--out DIR`` builds ``transformers``' ``BertModel`` in its default configuration (12 layers,
hidden 768, 12 heads, vocabulary 30,522: 109,482,240 parameters with the pooler), traces it to
TorchScript (``DIR/bert_base.pt``, inputs ``input_ids`` and ``attention_mask``, output the
pooled 768-vector), writes ``synthetic_text`` (``DIR/synthetic_text.npz``: seeded token ids
and attention masks, each sample padded after a random length of at least half the
sequence) and ``DIR/text_model.json`` (parameters, and the forward FLOPs per sample counted
by ``torch.utils.flop_counter``). The entry then serves the file as it serves a user's own
TorchScript model: natively on PyTorch, exported to ONNX for ONNX Runtime and OpenVINO. It
runs in a process of its own, so that neither PyTorch nor transformers is loaded where
another runtime is measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.errors import ConfigError, exit_code_of

#: The text models, served on the runtimes that take a TorchScript or ONNX model. TensorFlow
#: is not among them: transformers' TFBertModel needs the Keras 2 package (tf-keras), which
#: this project's TensorFlow 2.21 with Keras 3 does not install.
TEXT_MODELS = ("bert_base",)
TEXT_RUNTIMES = ("pytorch", "onnxruntime", "openvino")
MAX_SEQUENCE_LENGTH = 512  # BERT's position embeddings
TEXT_SAMPLES = 64
INPUTS = ("input_ids", "attention_mask")
MODEL_FILE, DATA_FILE, ABOUT_FILE = "bert_base.pt", "synthetic_text.npz", "text_model.json"


def synthetic_text(vocabulary: int, sequence_length: int, seed: int,
                   n: int = TEXT_SAMPLES) -> dict[str, np.ndarray]:
    """Seeded token ids in [1, vocabulary) and attention masks: each sample is real for a
    random length of at least half the sequence, padding (id 0, mask 0) after."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocabulary, (n, sequence_length), dtype=np.int64)
    lengths = rng.integers((sequence_length + 1) // 2, sequence_length + 1, n)
    mask = (np.arange(sequence_length)[None, :] < lengths[:, None]).astype(np.int64)
    return {"input_ids": ids * mask, "attention_mask": mask}


def input_flags(sequence_length: int) -> tuple[str, str]:
    """The ``input_shape`` and ``input_dtype`` a user would give for this model."""
    return ",".join(f"{name}:{sequence_length}" for name in INPUTS), "int64"


def check_sequence_length(sequence_length: int) -> None:
    if not 1 <= sequence_length <= MAX_SEQUENCE_LENGTH:
        raise ConfigError(f"sequence_length must be between 1 and {MAX_SEQUENCE_LENGTH} "
                          f"(BERT's positions), got {sequence_length}")


def build(model: str, sequence_length: int, seed: int, directory: Path) -> dict[str, Any]:
    """Write the model file, its data and what it costs into ``directory``; returns the
    latter (``parameter_count``, ``forward_flops``)."""
    if model not in TEXT_MODELS:
        raise ConfigError(f"unknown text model {model!r}; choose one of: "
                          f"{', '.join(TEXT_MODELS)}")
    check_sequence_length(sequence_length)
    from mlflow_dlaas._imports import import_optional

    torch = import_optional("torch", extra="text", purpose="Building BERT-base")
    transformers = import_optional("transformers", extra="text", purpose="Building BERT-base")
    torch.manual_seed(seed)
    bert = transformers.BertModel(transformers.BertConfig()).eval()
    module = _pooled(torch, bert).eval()
    config = bert.config
    data = synthetic_text(config.vocab_size, sequence_length, seed)
    example = tuple(torch.from_numpy(data[name][:2]) for name in INPUTS)
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")  # the tracer's notes on transformers' Python branches
        traced = torch.jit.trace(module, example, check_trace=False)
    directory.mkdir(parents=True, exist_ok=True)
    traced.save(str(directory / MODEL_FILE))
    np.savez(directory / DATA_FILE, **data)
    about = {"model": model, "sequence_length": sequence_length,
             "parameter_count": sum(p.numel() for p in bert.parameters()),
             "forward_flops": _forward_flops(torch, module, example),
             "layers": config.num_hidden_layers, "hidden": config.hidden_size}
    (directory / ABOUT_FILE).write_text(json.dumps(about))
    return about


def _pooled(torch: Any, bert: Any) -> Any:
    """BERT called with positional (input_ids, attention_mask), returning the pooled vector."""

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).pooler_output

    return Pooled()


def _forward_flops(torch: Any, module: Any, example: tuple[Any, ...]) -> int:
    """One sample's forward FLOPs, as ``torch.utils.flop_counter`` counts them (2 per
    multiply-add of the matrix products). Counted on PyTorch's math attention: the counter
    has no formula for the fused CPU attention kernel and would leave out the two attention
    products (2.7 % of the total at 128 tokens)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter, \
            torch.inference_mode():
        module(*(tensor[:1] for tensor in example))
    return int(counter.get_total_flops())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--sequence_length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    return exit_code_of(lambda: build(args.model, args.sequence_length, args.seed, args.out))


if __name__ == "__main__":
    sys.exit(main())
