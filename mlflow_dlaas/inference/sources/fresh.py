"""A fresh model: an architecture of the registry with seeded random weights.

The measured worker builds it itself where its runtime builds models (:func:`fresh_source`);
for the runtimes that serve ONNX, ``python -m mlflow_dlaas.inference.sources.fresh --model
lenet5 --seed 0 --out DIR [--input_shape 1x28x28]`` builds it with the fresh-model builder in
a process of its own and writes the ONNX file, the reference and the manifest, so that the
measured worker never imports the builder's framework: its memory is the runtime's own.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mlflow_dlaas.backends import InferenceRuntime, get_runtime
from mlflow_dlaas.backends.served_model import ModelSource
from mlflow_dlaas.errors import ConfigError, exit_code_of
from mlflow_dlaas.inference.sources.manifest import ONNX_DIR, SourceManifest, write_reference
from mlflow_dlaas.models import get_model
from mlflow_dlaas.models.spec import ArchitectureSpec

REFERENCE_SAMPLES = 8
#: The runtime that builds the fresh models the ONNX runtimes serve, and exports them.
FRESH_BUILDER = "pytorch"
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


def fresh_inputs(shape: tuple[int, ...], seed: int, n: int = REFERENCE_SAMPLES) -> np.ndarray:
    return np.random.default_rng(seed).random((n, *shape), dtype=np.float32)


def fresh_source(runtime: InferenceRuntime, model: str, input_shape: str, seed: int
                 ) -> ModelSource:
    """``model`` with random weights as ``runtime`` (loaded) takes it."""
    spec = get_model(model)
    shape, classes = fresh_sizes(spec, parse_shape(input_shape) if input_shape else None)
    return runtime.fresh_source(spec, shape, classes, fresh_inputs(shape, seed), seed)


def export_fresh(model: str, input_shape: str, seed: int, directory: Path) -> None:
    """Build ``model`` with the fresh-model builder and write ``directory``'s ONNX file,
    reference and manifest."""
    builder = get_runtime(FRESH_BUILDER)
    builder.load()
    source = fresh_source(builder, model, input_shape, seed)
    builder.export_onnx(source, directory / ONNX_DIR / "model.onnx")
    write_reference(directory, source.reference_inputs, source.reference_outputs)
    SourceManifest("fresh", model, builder.name, source.input_shape,
                   source.num_classes).write(directory)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--input_shape", default="")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    return exit_code_of(lambda: export_fresh(args.model, args.input_shape, args.seed, args.out))


if __name__ == "__main__":
    sys.exit(main())
