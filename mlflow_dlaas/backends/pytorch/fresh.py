"""A fresh model of the registry in PyTorch, random weights: the module, its outputs on the
reference inputs, and its ONNX export (for the runtimes that serve ONNX)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends.pytorch.training import build_module
from mlflow_dlaas.backends.served_model import ModelSource
from mlflow_dlaas.models.spec import ArchitectureSpec


def fresh_torch_source(torch: Any, spec: ArchitectureSpec, shape: tuple[int, int, int],
                       classes: int, inputs: np.ndarray, seed: int) -> ModelSource:
    """``spec`` built with seeded random weights, and its outputs on ``inputs``."""
    torch.manual_seed(seed)
    module = build_module(torch, spec, shape, classes)
    module.eval()
    with torch.inference_mode():
        outputs = module(torch.from_numpy(inputs)).numpy()
    return ModelSource(spec.name, shape, classes, inputs, outputs, "pytorch", spec,
                       torch_module=module)


def export_torch_onnx(torch: Any, source: ModelSource, path: Path) -> None:
    """ONNX of a fresh module with a dynamic batch dimension (TorchScript exporter: no
    onnxscript needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(source.torch_module,
                          (torch.from_numpy(source.reference_inputs[:1]),), str(path),
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                          dynamo=False)
