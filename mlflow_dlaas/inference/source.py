"""Where an inference model comes from: a training run, or fresh from an architecture.

Every source carries reference inputs and the outputs the *source framework* computed on
them, so that any runtime can be checked against it before timing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends.served_model import ModelSource
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.user_model import read_user_model
from mlflow_dlaas.models import get_model
from mlflow_dlaas.models.spec import ArchitectureSpec

REFERENCE_SAMPLES = 8
ONNX_DIR = "onnx"
MODEL_DIR = "model"
#: What a downloaded run source says about itself (written by the entry process).
SOURCE_FILE = "source.json"
#: The folder holding a source prepared by the entry (a run's download or a fresh export).
SOURCE_ENV = "DLAAS_RUN_SOURCE_DIR"
#: Input sizes of the fresh models without their own (the ImageNet models have theirs).
DEFAULT_INPUTS = {"cifar10_quick": (3, 32, 32)}


def fresh_sizes(spec: ArchitectureSpec, shape: tuple[int, int, int] | None
                ) -> tuple[tuple[int, int, int], int]:
    """(input shape, classes) of a fresh model: the asked shape, else the model's own, else
    MNIST's; its own classes (10 for the small models)."""
    shape = shape or spec.input_shape or DEFAULT_INPUTS.get(spec.name, (1, 28, 28))
    spec.shapes(shape, spec.classes)
    return shape, spec.classes


def parse_shape(text: str) -> tuple[int, int, int]:
    found = re.fullmatch(r"(\d+)x(\d+)x(\d+)", text.strip())
    if not found:
        raise ConfigError(f"input_shape {text!r} must look like 3x32x32 (channels x height x "
                          "width)")
    c, h, w = (int(v) for v in found.groups())
    return (c, h, w)


def fresh_inputs(shape: tuple[int, int, int], seed: int, n: int = REFERENCE_SAMPLES
                 ) -> np.ndarray:
    return np.random.default_rng(seed).random((n, *shape), dtype=np.float32)


def fresh_torch_source(model: str, shape: tuple[int, int, int] | None, seed: int,
                       workdir: Path | None) -> ModelSource:
    """Build ``model`` in PyTorch with random weights and compute the reference; export it
    to ONNX in ``workdir`` when given (the exporter's imports cost memory where the module
    itself is served)."""
    from mlflow_dlaas._imports import import_optional
    from mlflow_dlaas.backends.pytorch.training import build_module

    torch = import_optional("torch", extra="torch", purpose="Building fresh models")
    torch.manual_seed(seed)
    spec = get_model(model)
    shape, classes = fresh_sizes(spec, shape)
    module = build_module(torch, spec, shape, classes)
    module.eval()
    inputs = fresh_inputs(shape, seed)
    with torch.inference_mode():
        outputs = module(torch.from_numpy(inputs)).numpy()
    onnx_path = None if workdir is None else workdir / "model.onnx"
    if onnx_path is not None:
        export_torch_onnx(torch, module, inputs, onnx_path)
    return ModelSource(model, shape, classes, inputs, outputs, "pytorch", spec,
                       onnx_path=onnx_path, torch_module=module)


def export_torch_onnx(torch: Any, module: Any, example: np.ndarray, path: Path) -> None:
    """ONNX with a dynamic batch dimension (TorchScript exporter: no onnxscript needed)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.from_numpy(example[:1]),), str(path),
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                          dynamo=False)


def fresh_native_source(model: str, shape: tuple[int, int, int] | None, seed: int,
                        framework: str) -> ModelSource:
    """A spec to be built natively by the runtime itself (TensorFlow, MXNet)."""
    spec = get_model(model)
    shape, classes = fresh_sizes(spec, shape)
    inputs = fresh_inputs(shape, seed)
    return ModelSource(model, shape, classes, inputs, np.empty((0,)), framework, spec)


def run_source(directory: Path) -> ModelSource:
    """A model from a folder filled in another process: a training run's (params, ONNX
    export, reference outputs, model files) or a fresh export's (``fresh_export``)."""
    about = json.loads((directory / SOURCE_FILE).read_text())
    if "user" in about:
        user, inputs, outputs = read_user_model(directory, about)
        return ModelSource(about["model"], user.inputs[0].shape, 0, inputs, outputs,  # type: ignore[arg-type]
                           about["framework"], onnx_path=user.onnx_path, user=user,
                           forward_flops=about.get("forward_flops"),
                           parameter_count=about.get("parameter_count"))
    shape = parse_shape(about["input_shape"])
    onnx_dir, model_dir = directory / ONNX_DIR, directory / MODEL_DIR
    onnx_path = onnx_dir / "model.onnx"
    try:
        reference_inputs = np.load(onnx_dir / "reference_inputs.npy")
        reference_outputs = np.load(onnx_dir / "reference_outputs.npy")
    except OSError:
        reference_inputs, reference_outputs = fresh_inputs(shape, 0), np.empty((0,))
    return ModelSource(about["model"], shape, int(about["num_classes"]), reference_inputs,
                       reference_outputs, about["framework"], get_model(about["model"]),
                       run_id=about["run_id"], trained_with=about["framework"],
                       onnx_path=onnx_path if onnx_path.is_file() else None,
                       model_dir=model_dir if model_dir.is_dir() else None)


def log_reference(directory: Path, inputs: np.ndarray, outputs: np.ndarray) -> None:
    """Write the reference arrays beside an ONNX export (done by training runs)."""
    np.save(directory / "reference_inputs.npy", inputs)
    np.save(directory / "reference_outputs.npy", outputs)
