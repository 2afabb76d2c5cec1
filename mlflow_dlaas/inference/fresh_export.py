"""Export a fresh model to ONNX in a process of its own, for runtimes that serve ONNX.

``python -m mlflow_dlaas.inference.fresh_export --model lenet5 --seed 0 --out DIR [--input_shape
1x28x28]`` builds the model in PyTorch, exports it and writes the folder layout of a fetched
training run (``source.json``, ``onnx/``), so the measured worker of ONNX Runtime or OpenVINO
never imports PyTorch: its memory is the runtime's own.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from mlflow_dlaas.errors import exit_code_of
from mlflow_dlaas.inference.source import (
    ONNX_DIR,
    SOURCE_FILE,
    fresh_torch_source,
    log_reference,
    parse_shape,
)


def export_fresh(model: str, input_shape: str, seed: int, directory: Path) -> None:
    """Write ``directory``/source.json and ``directory``/onnx/ for a fresh ``model``."""
    onnx_dir = directory / ONNX_DIR
    onnx_dir.mkdir(parents=True, exist_ok=True)
    shape = parse_shape(input_shape) if input_shape else None
    source = fresh_torch_source(model, shape, seed, onnx_dir)
    log_reference(onnx_dir, source.reference_inputs, source.reference_outputs)
    about = {"run_id": None, "model": model, "input_shape": "x".join(map(str, source.input_shape)),
             "num_classes": source.num_classes, "framework": "pytorch"}
    (directory / SOURCE_FILE).write_text(json.dumps(about))


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
