"""The user's own model, opened in its own framework: any file kind a backend registers (an
ONNX file, a TorchScript or ``torch.export`` file, a Keras ``.keras`` file or a TensorFlow
SavedModel directory, and plug-ins' kinds); MLflow models arrive here as such files,
downloaded by the entry process.

``python -m mlflow_dlaas.inference.sources.user_files --model PATH --runtime onnxruntime
--out DIR [--input_shape ...] [--input_dtype ...] [--input_data x.npz] [--seed 0]`` runs in a
process of its own, before the measured worker: it opens the model in its own framework, works
out its inputs (from the model, or from ``-P input_shape`` / ``input_dtype`` where dimensions
are dynamic), computes the reference outputs there, exports the model to ONNX where the
runtime serves ONNX and the model is of another kind, and writes the folder's manifest and
reference. The measured worker then loads only the runtime. Nothing here imports MLflow.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends import get_runtime
from mlflow_dlaas.backends.formats import format_of, needs_onnx_export, refusal
from mlflow_dlaas.backends.model_files import SHAPE_HINT
from mlflow_dlaas.backends.served_model import UserModel
from mlflow_dlaas.errors import ConfigError, DlaasError, exit_code_of
from mlflow_dlaas.inference.sources.inputs import file_feed, in_batches, synthetic_feed
from mlflow_dlaas.inference.sources.manifest import (
    ONNX_DIR,
    SourceManifest,
    write_reference,
)

REFERENCE_SAMPLES = 4


def parse_named(text: str, what: str, value: Callable[[str], Any]) -> dict[str | None, Any]:
    """``3x224x224`` (every input) or ``ids:128,mask:128`` (per input name)."""
    found: dict[str | None, Any] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, rest = part.rpartition(":")
        found[name if sep else None] = value(rest)
    if not found:
        raise ConfigError(f"{what} {text!r} is empty")
    return found


def _shape(text: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+(x\d+)*", text.strip()):
        raise ConfigError(f"input_shape {text!r} must look like 3x224x224 {SHAPE_HINT}")
    return tuple(int(v) for v in text.strip().split("x"))


def _dtype(text: str) -> str:
    try:
        return np.dtype(text.strip()).name
    except TypeError:
        raise ConfigError(f"input_dtype {text!r} is not a numpy dtype (float32, int64, "
                          "bool, ...)") from None


def parse_shapes(text: str) -> dict[str | None, tuple[int, ...]]:
    return parse_named(text, "input_shape", _shape) if text else {}


def parse_dtypes(text: str) -> dict[str | None, str]:
    return parse_named(text, "input_dtype", _dtype) if text else {}


def size_bytes(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def check_fits_memory(path: Path, copies: int = 1) -> None:
    """Refuse a model whose files alone exceed the memory available now (a runtime holds at
    least its weights; ``copies`` for an ensemble)."""
    import psutil

    need, available = size_bytes(path) * copies, psutil.virtual_memory().available
    if need > available:
        raise ConfigError(f"model {path.name} needs at least {need / 2**30:.1f} GiB "
                          f"({copies} cop{'y' if copies == 1 else 'ies'}) but only "
                          f"{available / 2**30:.1f} GiB of memory is available")


def open_user_model(path: Path, *, runtime: str, directory: Path, input_shape: str = "",
                    input_dtype: str = "", input_data: str = "", seed: int = 0,
                    copies: int = 1) -> SourceManifest:
    """Open ``path`` in its own framework and write ``directory``'s manifest and reference
    (and ``onnx/model.onnx`` where ``runtime`` serves the model through its ONNX export)."""
    path = path.resolve()
    served_by = get_runtime(runtime)
    model_format = format_of(path)
    reason = refusal(model_format, served_by)
    if reason:
        raise ConfigError(reason)
    check_fits_memory(path, copies)
    opened = model_format.open(path, parse_shapes(input_shape), parse_dtypes(input_dtype))
    specs = opened.inputs
    data_path = Path(input_data).expanduser().resolve() if input_data else None
    if data_path is not None and not data_path.is_file():
        raise ConfigError(f"input_data file {data_path} does not exist")
    fixed = next((s.fixed_batch for s in specs if s.fixed_batch), None)
    feed = (file_feed(data_path, specs)[: fixed or REFERENCE_SAMPLES] if data_path
            else synthetic_feed(specs, fixed or REFERENCE_SAMPLES, seed))
    try:
        outputs = in_batches(opened.reference, feed, fixed)
    except DlaasError:
        raise
    except Exception as e:
        raise ConfigError(f"{model_format.framework} could not run {path.name} on inputs "
                          f"{feed!r}: {str(e).strip().splitlines()[0][:300]}; check -P "
                          "input_shape / input_dtype") from None
    onnx_path: Path | None = path if model_format.framework == served_by.consumes else None
    if needs_onnx_export(model_format, served_by):
        onnx_path = directory / ONNX_DIR / "model.onnx"
        onnx_path.parent.mkdir(parents=True, exist_ok=True)
        assert model_format.export_onnx is not None  # refusal() said it exports
        model_format.export_onnx(path, opened, feed, onnx_path)
    directory.mkdir(parents=True, exist_ok=True)
    write_reference(directory, feed, outputs)
    manifest = SourceManifest("user", path.stem, model_format.framework, user=UserModel(
        model_format.kind, path, onnx_path, specs, data_path))
    manifest.write(directory)
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--runtime", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--input_shape", default="")
    parser.add_argument("--input_dtype", default="")
    parser.add_argument("--input_data", default="")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--copies", type=int, default=1)
    args = parser.parse_args(argv)
    return exit_code_of(lambda: open_user_model(
        args.model, runtime=args.runtime, directory=args.out, input_shape=args.input_shape,
        input_dtype=args.input_dtype, input_data=args.input_data, seed=args.seed,
        copies=args.copies))


if __name__ == "__main__":
    sys.exit(main())
