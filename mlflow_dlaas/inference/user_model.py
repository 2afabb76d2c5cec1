"""The user's own model: an ONNX file, a TorchScript or ``torch.export`` file, a Keras
``.keras`` file or a TensorFlow SavedModel directory (MLflow models arrive here as such files,
downloaded by the entry process).

``python -m mlflow_dlaas.inference.user_model --model PATH --runtime onnxruntime --out DIR
[--input_shape ...] [--input_dtype ...] [--input_data x.npz] [--seed 0]`` runs in a process of
its own, before the measured worker: it opens the model in its own framework, works out its
inputs (from the graph, or from ``-P input_shape`` / ``input_dtype`` where dimensions are
dynamic), computes the reference outputs there, exports a PyTorch model to ONNX for the ONNX
runtimes, and writes ``DIR/source.json`` and ``DIR/reference.npz``. The measured worker then
loads only the runtime. Nothing here imports MLflow.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends.feed import Feed
from mlflow_dlaas.backends.model_files import SHAPE_HINT, article
from mlflow_dlaas.backends.onnxruntime.formats import open_onnx
from mlflow_dlaas.backends.pytorch.formats import export_torch, open_torch
from mlflow_dlaas.backends.served_model import InputSpec, UserModel
from mlflow_dlaas.backends.tensorflow.formats import export_keras, open_keras
from mlflow_dlaas.errors import ConfigError, DlaasError, exit_code_of

#: How each kind of file is recognised, and the framework that is its reference.
KINDS = {"onnx": "onnx", "torchscript": "pytorch", "torch_export": "pytorch",
         "torch_pickle": "pytorch", "keras": "tensorflow", "savedmodel": "tensorflow"}
#: Which runtimes take which kind: the ONNX runtimes take ONNX and (exported) PyTorch models.
SERVES = {"onnx": {"onnx", "torchscript", "torch_export", "torch_pickle"},
          "pytorch": {"torchscript", "torch_export", "torch_pickle"},
          "tensorflow": {"keras", "savedmodel"}}
SOURCE_FILE, REFERENCE_FILE, EXPORT_DIR = "source.json", "reference.npz", "onnx"
REFERENCE_SAMPLES = 4
#: synthetic integer inputs (token ids, indices) are drawn from [0, INT_HIGH)
INT_HIGH = 10


# --------------------------------------------------------------------------- parameters
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


# --------------------------------------------------------------------------- files
def detect_kind(path: Path) -> str:
    """The kind of model file ``path`` is; a clear error when it is missing or unknown."""
    if not path.exists():
        raise ConfigError(f"model file {path} does not exist")
    if path.is_dir():
        if (path / "saved_model.pb").is_file():
            return "savedmodel"
        raise ConfigError(f"{path} is a directory but not a TensorFlow SavedModel (no "
                          "saved_model.pb); give a model file")
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        return "onnx"
    if suffix in (".keras", ".h5"):
        return "keras"
    if suffix == ".pt2":
        return "torch_export"
    if suffix in (".pt", ".pth", ".ts", ".jit", ".torchscript"):
        import zipfile

        try:  # TorchScript archives hold code/; torch.save's hold only data.pkl
            names = zipfile.ZipFile(path).namelist()
        except (zipfile.BadZipFile, OSError):
            raise ConfigError(f"cannot read {path.name} as a PyTorch model: not a TorchScript "
                              "or torch.save archive") from None
        return "torchscript" if any("/code/" in n for n in names) else "torch_pickle"
    raise ConfigError(f"unknown model format {path.name!r}: give an .onnx file, a TorchScript "
                      ".pt, a torch.export .pt2, a Keras .keras file or a SavedModel directory")


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


def refusal(kind: str, runtime: str, consumes: str) -> str | None:
    """Why ``runtime`` cannot serve a model of ``kind`` (one line), or None."""
    if kind in SERVES.get(consumes, set()):
        return None
    if kind in ("keras", "savedmodel") and consumes == "onnx":
        if has_tf2onnx():
            return None
        return (f"the {runtime} runtime serves ONNX, and converting a {KINDS[kind]} model to "
                "ONNX needs tf2onnx, which is not installed here (pip install tf2onnx); "
                "serve it with the tensorflow runtime")
    return (f"the {runtime} runtime cannot load {article(kind)} {kind} model; serve it with "
            f"{' or '.join(runtimes_for(kind))}")


def has_tf2onnx() -> bool:
    """Whether the TensorFlow-to-ONNX converter is installed (Keras models on ONNX runtimes)."""
    import importlib.util

    return importlib.util.find_spec("tf2onnx") is not None


def runtimes_for(kind: str) -> list[str]:
    by_consumes = {"onnx": ["onnxruntime", "openvino"], "pytorch": ["pytorch"],
                   "tensorflow": ["tensorflow"]}
    return [r for c, rs in by_consumes.items() if kind in SERVES[c] for r in rs]


# --------------------------------------------------------------------------- inputs
def synthetic_feed(specs: Sequence[InputSpec], n: int, seed: int) -> Feed:
    """``n`` seeded samples per input: uniform [0, 1) floats, integers in [0, INT_HIGH).
    Their size is checked against the memory available before any is made."""
    check_inputs_fit_memory(specs, n)
    rng = np.random.default_rng(seed)
    arrays = {}
    for spec in specs:
        dtype = np.dtype(spec.dtype)
        shape = (n, *spec.shape)
        if dtype == np.bool_:
            arrays[spec.name] = rng.random(shape, dtype=np.float32) < 0.5
        elif np.issubdtype(dtype, np.integer):
            arrays[spec.name] = rng.integers(0, INT_HIGH, shape, dtype=np.int64).astype(dtype)
        elif dtype in (np.float32, np.float64):
            arrays[spec.name] = rng.random(shape, dtype=dtype)
        else:
            arrays[spec.name] = rng.random(shape, dtype=np.float32).astype(dtype)
    return Feed(arrays)


def check_inputs_fit_memory(specs: Sequence[InputSpec], n: int) -> None:
    """Refuse ``n`` samples of ``specs`` whose making would take more than half the memory
    available now (a model declaring 10^9 elements a sample asked for 30 GiB), naming the
    input that makes them large."""
    import psutil

    def sample_bytes(spec: InputSpec) -> int:
        return math.prod(spec.shape) * max(np.dtype(spec.dtype).itemsize, 8)  # the draw's

    need = n * sum(sample_bytes(s) for s in specs)
    available = psutil.virtual_memory().available
    if need > available / 2:
        largest = max(specs, key=sample_bytes)
        raise ConfigError(
            f"input {largest.name!r} declares {math.prod(largest.shape):,} elements a sample "
            f"({'x'.join(map(str, largest.shape))}); {n} samples need {need / 2**30:.1f} GiB, "
            f"more than half the {available / 2**30:.1f} GiB available: check the model's "
            "input shape, or give -P input_shape (and fewer samples)")


def file_feed(path: Path, specs: Sequence[InputSpec]) -> Feed:
    """Real samples from an ``.npz`` (one array per input name; one unnamed array for a model
    with one input), checked against the model's inputs."""
    try:
        with np.load(path) as found:
            arrays = {k: found[k] for k in found.files}
    except (OSError, ValueError) as e:
        raise ConfigError(f"input_data {path}: cannot read it as .npz ({e})") from None
    if len(specs) == 1 and len(arrays) == 1:
        arrays = {specs[0].name: next(iter(arrays.values()))}
    missing = [s.name for s in specs if s.name not in arrays]
    if missing:
        raise ConfigError(f"input_data {path} has no array for input(s) {', '.join(missing)} "
                          f"(it holds {', '.join(arrays) or 'nothing'})")
    feed = {}
    for spec in specs:
        array = arrays[spec.name]
        if tuple(array.shape[1:]) != spec.shape:
            raise ConfigError(f"input_data {path}: {spec.name} holds samples of shape "
                              f"{list(array.shape[1:])}, the model takes {list(spec.shape)}")
        feed[spec.name] = np.ascontiguousarray(array.astype(spec.dtype, copy=False))
    try:
        return Feed(feed)
    except ValueError as e:
        raise ConfigError(f"input_data {path}: {e}") from None


def inputs_for(user: UserModel, n: int, seed: int) -> Feed:
    """``n`` samples for the measured scenarios: the user's data (cycled) or synthetic."""
    if user.input_data is None:
        return synthetic_feed(user.inputs, n, seed)
    data = file_feed(user.input_data, user.inputs)
    return data[np.resize(np.arange(len(data)), n)]


def in_batches(predict: Callable[[Feed], np.ndarray], feed: Feed, step: int | None
               ) -> np.ndarray:
    """Outputs for every sample of ``feed``, in batches of ``step`` (a fixed-batch model)."""
    if not step or step == len(feed):
        return predict(feed)
    if len(feed) % step:
        feed = feed[np.resize(np.arange(len(feed)), -(-len(feed) // step) * step)]
    return np.concatenate([predict(feed[i : i + step]) for i in range(0, len(feed), step)])


# --------------------------------------------------------------------------- frameworks
# --------------------------------------------------------------------------- preparation
def prepare(path: Path, *, runtime: str, consumes: str, directory: Path, input_shape: str = "",
            input_dtype: str = "", input_data: str = "", seed: int = 0, copies: int = 1) -> None:
    """Open ``path`` in its own framework and write ``directory``'s ``source.json`` and
    ``reference.npz`` (and ``onnx/model.onnx`` for a PyTorch model served as ONNX)."""
    path = path.resolve()
    kind = detect_kind(path)
    reason = refusal(kind, runtime, consumes)
    if reason:
        raise ConfigError(reason)
    check_fits_memory(path, copies)
    shapes, dtypes = parse_shapes(input_shape), parse_dtypes(input_dtype)
    directory.mkdir(parents=True, exist_ok=True)
    onnx_path: Path | None = path if kind == "onnx" else None
    module = keras_call = None
    if kind == "onnx":
        reference, specs, framework = open_onnx(path, shapes, dtypes)
    elif KINDS[kind] == "pytorch":
        reference, specs, module = open_torch(kind, path, shapes, dtypes)
        framework = "pytorch"
    else:
        reference, specs, keras_call = open_keras(kind, path, shapes, dtypes)
        framework = "tensorflow"
    data_path = Path(input_data).expanduser().resolve() if input_data else None
    if data_path is not None and not data_path.is_file():
        raise ConfigError(f"input_data file {data_path} does not exist")
    fixed = next((s.fixed_batch for s in specs if s.fixed_batch), None)
    feed = (file_feed(data_path, specs)[: fixed or REFERENCE_SAMPLES] if data_path
            else synthetic_feed(specs, fixed or REFERENCE_SAMPLES, seed))
    try:
        outputs = in_batches(reference, feed, fixed)
    except DlaasError:
        raise
    except Exception as e:
        raise ConfigError(f"{framework} could not run {path.name} on inputs "
                          f"{feed!r}: {str(e).strip().splitlines()[0][:300]}; check -P "
                          "input_shape / input_dtype") from None
    if consumes == "onnx" and module is not None:
        onnx_path = directory / EXPORT_DIR / "model.onnx"
        export_torch(path if kind == "torch_export" else module, specs, feed, onnx_path)
    if consumes == "onnx" and keras_call is not None:
        onnx_path = directory / EXPORT_DIR / "model.onnx"
        export_keras(keras_call, specs, onnx_path)
    np.savez(directory / REFERENCE_FILE, __outputs__=outputs,
             **{f"in.{k}": v for k, v in feed.arrays.items()})
    about = {"user": {"kind": kind, "path": str(path),
                      "onnx_path": str(onnx_path) if onnx_path else None,
                      "inputs": [asdict(s) for s in specs],
                      "input_data": str(data_path) if data_path else None},
             "model": path.stem, "framework": framework}
    (directory / SOURCE_FILE).write_text(json.dumps(about))


def read_user_model(directory: Path, about: dict) -> tuple[UserModel, Feed, np.ndarray]:
    """The prepared model, its reference inputs and outputs (worker side)."""
    user = about["user"]
    specs = tuple(InputSpec(s["name"], tuple(s["shape"]), s["dtype"], s["fixed_batch"])
                  for s in user["inputs"])
    with np.load(directory / REFERENCE_FILE) as saved:
        outputs = saved["__outputs__"]
        feed = Feed({s.name: saved[f"in.{s.name}"] for s in specs})
    model = UserModel(user["kind"], Path(user["path"]),
                      Path(user["onnx_path"]) if user["onnx_path"] else None, specs,
                      Path(user["input_data"]) if user["input_data"] else None)
    return model, feed, outputs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--runtime", required=True)
    parser.add_argument("--consumes", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--input_shape", default="")
    parser.add_argument("--input_dtype", default="")
    parser.add_argument("--input_data", default="")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--copies", type=int, default=1)
    args = parser.parse_args(argv)
    return exit_code_of(lambda: prepare(
        args.model, runtime=args.runtime, consumes=args.consumes, directory=args.out,
        input_shape=args.input_shape, input_dtype=args.input_dtype, input_data=args.input_data,
        seed=args.seed, copies=args.copies))


if __name__ == "__main__":
    sys.exit(main())
