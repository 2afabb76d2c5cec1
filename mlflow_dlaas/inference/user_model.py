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
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.errors import ConfigError, DlaasError, exit_code_of
from mlflow_dlaas.inference.feed import Feed

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
SHAPE_HINT = ("(the shape of one sample, without the batch dimension; name:shape,... for "
              "several inputs)")


@dataclass(frozen=True)
class InputSpec:
    """One model input: per-sample shape (no batch dimension), numpy dtype name, and the
    batch size the model fixes (None when the batch dimension is dynamic)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    fixed_batch: int | None = None


@dataclass(frozen=True)
class UserModel:
    """What the entry's preparation found out, read back by the measured worker."""

    kind: str
    path: Path  # the model as the user gave it (file or SavedModel directory)
    onnx_path: Path | None  # the ONNX file for the ONNX runtimes (given, or exported)
    inputs: tuple[InputSpec, ...]
    input_data: Path | None = None

    def describe_inputs(self) -> str:
        """``x:float32[3x224x224],mask:int64[128]`` (per sample)."""
        return ",".join(f"{s.name}:{s.dtype}[{'x'.join(map(str, s.shape))}]"
                        for s in self.inputs)

    @property
    def fixed_batch(self) -> int | None:
        return next((s.fixed_batch for s in self.inputs if s.fixed_batch), None)


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
    return (f"the {runtime} runtime cannot load {_article(kind)} {kind} model; serve it with "
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
def resolve_inputs(declared: list[tuple[str, list[int | None], str]], shapes: dict,
                   dtypes: dict, *, origin: str) -> tuple[InputSpec, ...]:
    """Inputs from what the model declares (name, dims with None where dynamic, dtype) and
    the user's ``-P input_shape`` / ``input_dtype``, which fill or override."""
    if not declared:
        raise ConfigError(f"the {origin} declares no inputs")
    unknown = sorted(str(n) for n in (set(shapes) | set(dtypes)) - {None}
                     - {d[0] for d in declared})
    if unknown:
        raise ConfigError(f"input_shape / input_dtype name input(s) {', '.join(unknown)}; "
                          f"the model's inputs are {', '.join(d[0] for d in declared)}")
    specs = []
    for name, dims, dtype in declared:
        given = shapes.get(name, shapes.get(None))
        if not dims:
            raise ConfigError(f"input {name!r} of the {origin} is a scalar: there is no batch "
                              "dimension to measure over")
        batch, rest = dims[0], dims[1:]
        if given is not None:
            if any(d is not None and d != g for d, g in zip(rest, given, strict=False)) or (
                    rest and len(given) != len(rest)):
                raise ConfigError(f"input_shape {'x'.join(map(str, given))} does not fit input "
                                  f"{name!r} of shape {_dims(dims)} (per sample: "
                                  f"{_dims(rest)})")
            rest = list(given)
        if any(d is None for d in rest):
            raise ConfigError(f"input {name!r} has dynamic dimensions {_dims(dims)}; give "
                              f"-P input_shape={name}:{_example(rest)} {SHAPE_HINT}")
        specs.append(InputSpec(name, tuple(int(d) for d in rest),
                               dtypes.get(name, dtypes.get(None, dtype)), batch))
    return tuple(specs)


def _dims(dims: Sequence[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _example(rest: Sequence[int | None]) -> str:
    return "x".join("N" if d is None else str(d) for d in rest) or "N"


def synthetic_feed(specs: Sequence[InputSpec], n: int, seed: int) -> Feed:
    """``n`` seeded samples per input: uniform [0, 1) floats, integers in [0, INT_HIGH)."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for spec in specs:
        dtype = np.dtype(spec.dtype)
        shape = (n, *spec.shape)
        if dtype == np.bool_:
            arrays[spec.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            arrays[spec.name] = rng.integers(0, INT_HIGH, shape).astype(dtype)
        else:
            arrays[spec.name] = rng.random(shape).astype(dtype)
    return Feed(arrays)


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
def _article(word: str) -> str:
    """'an' before a vowel sound as spoken (an ONNX, a TorchScript, a Keras)."""
    return "an" if word[:1].upper() in "AEIOU" else "a"


def _corrupt(path: Path, framework: str, error: Exception) -> ConfigError:
    text = str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__
    kind = f"{_article(framework)} {framework}"
    return ConfigError(f"cannot read {path.name} as {kind} model: {text}")


def open_onnx(path: Path, shapes: dict, dtypes: dict
              ) -> tuple[Callable[[Feed], np.ndarray], tuple[InputSpec, ...], str]:
    """The ONNX graph's inputs, and ONNX's own reference evaluator as the reference."""
    import onnx
    from onnx import helper

    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)  # runtimes report what it lets through (types)
    except Exception as e:  # protobuf DecodeError, ValidationError, ...
        raise _corrupt(path, "ONNX", e) from None
    weights = {i.name for i in model.graph.initializer}
    declared = []
    for value in model.graph.input:
        if value.name in weights:
            continue
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)).name
        declared.append((value.name, dims, dtype))
    specs = resolve_inputs(declared, shapes, dtypes, origin=f"ONNX graph {path.name}")

    def reference(feed: Feed) -> np.ndarray:
        try:
            from onnx.reference import ReferenceEvaluator

            return np.asarray(ReferenceEvaluator(model).run(None, feed.arrays)[0])
        except Exception:  # an operator the evaluator lacks: ONNX Runtime, unoptimised
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            session = ort.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
            return np.asarray(session.run(None, feed.arrays)[0])

    return reference, specs, "onnx"


def load_torch(torch: Any, kind: str, path: Path) -> Any:
    """The PyTorch module of a TorchScript, torch.export or pickled-module file."""
    try:
        if kind == "torchscript":
            return torch.jit.load(str(path), map_location="cpu").eval()
        if kind == "torch_export":
            return torch.export.load(str(path)).module()
        module = torch.load(str(path), weights_only=False, map_location="cpu")
    except Exception as e:
        raise _corrupt(path, f"PyTorch ({kind})", e) from None
    if not isinstance(module, torch.nn.Module):
        held = type(module).__name__
        raise ConfigError(f"{path.name} holds {_article(held)} {held}, not a module (a "
                          "state_dict has no architecture): save it with torch.jit.save or "
                          "torch.export.save")
    return module.eval()


def _torch_declared(torch: Any, kind: str, path: Path) -> list[tuple[str, list, str]]:
    if kind != "torch_export":
        return []
    program = torch.export.load(str(path))
    names = set(program.graph_signature.user_inputs)
    declared = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in names:
            value = node.meta["val"]
            dims = [d if isinstance(d, int) else None for d in value.shape]
            declared.append((node.name, dims, str(value.dtype).removeprefix("torch.")))
    return declared


def open_torch(kind: str, path: Path, shapes: dict, dtypes: dict
               ) -> tuple[Callable[[Feed], np.ndarray], tuple[InputSpec, ...], Any]:
    import torch

    module = load_torch(torch, kind, path)
    declared = _torch_declared(torch, kind, path)
    if not declared:  # TorchScript and pickled modules record no input shapes
        names = [n for n in shapes if n is not None] or ["input"]
        if not shapes:
            raise ConfigError(f"a {kind} model records no input shapes; give -P input_shape="
                              f"3x224x224 {SHAPE_HINT}, and -P input_dtype when not float32")
        declared = [(n, [None, *([None] * len(shapes.get(n, shapes.get(None)) or ()))],
                     "float32") for n in names]
    specs = resolve_inputs(declared, shapes, dtypes, origin=f"PyTorch model {path.name}")

    def reference(feed: Feed) -> np.ndarray:
        with torch.inference_mode():
            return first_output(module(*[torch.from_numpy(feed[s.name]) for s in specs]))

    return reference, specs, module


def first_output(out: Any) -> np.ndarray:
    """The first output of a model call (a tensor, a tuple / list / dict of them)."""
    while isinstance(out, (tuple, list)):
        out = out[0]
    if isinstance(out, dict):
        out = next(iter(out.values()))
    if hasattr(out, "detach"):
        out = out.detach().cpu().float().numpy() if out.is_floating_point() else out.numpy()
    return np.asarray(out)


def load_keras(tf: Any, kind: str, path: Path) -> tuple[Callable[..., Any], list]:
    """A callable on named inputs and the declared inputs (name, dims, dtype)."""
    try:
        if kind == "keras":
            model = tf.keras.models.load_model(str(path), compile=False)
            declared = [(t.name, list(t.shape), str(np.dtype(t.dtype).name))
                        for t in model.inputs]
            names = [d[0] for d in declared]
            return (lambda **x: model([x[n] for n in names] if len(names) > 1
                                      else x[names[0]], training=False)), declared
        loaded = tf.saved_model.load(str(path))
        signature = loaded.signatures["serving_default"]
    except KeyError:
        raise ConfigError(f"SavedModel {path} has no serving_default signature") from None
    except Exception as e:
        raise _corrupt(path, f"TensorFlow ({kind})", e) from None
    _, named = signature.structured_input_signature
    declared = [(name, list(spec.shape), spec.dtype.name) for name, spec in named.items()]

    def call(**x: Any) -> Any:
        return signature(**x)

    call.owner = loaded  # type: ignore[attr-defined]  # its variables live while call does
    return call, declared


def open_keras(kind: str, path: Path, shapes: dict, dtypes: dict
               ) -> tuple[Callable[[Feed], np.ndarray], tuple[InputSpec, ...], Any]:
    import os

    from mlflow_dlaas.frameworks.tensorflow import quiet_environment

    os.environ.update(quiet_environment())
    import tensorflow as tf

    call, declared = load_keras(tf, kind, path)
    specs = resolve_inputs(declared, shapes, dtypes, origin=f"{kind} model {path.name}")

    def reference(feed: Feed) -> np.ndarray:
        return first_output_tf(call(**{s.name: tf.constant(feed[s.name]) for s in specs}))

    return reference, specs, call


def export_keras(call: Callable[..., Any], specs: Sequence[InputSpec], path: Path) -> None:
    """ONNX of a Keras model or SavedModel through tf2onnx, inputs named as the model's."""
    import tensorflow as tf
    import tf2onnx

    names = [s.name for s in specs]

    def first(out: Any) -> Any:
        while isinstance(out, (tuple, list)):
            out = out[0]
        return out[sorted(out)[0]] if isinstance(out, dict) else out

    function = tf.function(lambda *xs: first(call(**dict(zip(names, xs, strict=True)))))
    signature = [tf.TensorSpec((s.fixed_batch, *s.shape), tf.as_dtype(s.dtype), name=s.name)
                 for s in specs]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        tf2onnx.convert.from_function(function, input_signature=signature, opset=17,
                                      output_path=str(path))
    except Exception as e:
        raise ConfigError(f"converting the TensorFlow model to ONNX (tf2onnx) failed, so the "
                          f"ONNX runtimes cannot serve it: "
                          f"{str(e).strip().splitlines()[0][:300]}") from None


def first_output_tf(out: Any) -> np.ndarray:
    while isinstance(out, (tuple, list)):
        out = out[0]
    if isinstance(out, dict):
        out = out[sorted(out)[0]]
    return np.asarray(out)


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


def export_torch(module: Any, specs: Sequence[InputSpec], feed: Feed, path: Path) -> None:
    """ONNX of a PyTorch model, batch dimension dynamic (unless the model fixes it). A
    ``torch.export`` file (``module`` is its path) goes through the dynamo exporter, which
    keeps the program's own dynamic dimensions; other modules through the TorchScript one."""
    import contextlib
    import io
    import warnings

    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    example = tuple(torch.from_numpy(feed[s.name][:1] if not s.fixed_batch else feed[s.name])
                    for s in specs)
    names = [s.name for s in specs]
    dynamic = {n: {0: "batch"} for s, n in zip(specs, names, strict=True) if not s.fixed_batch}
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            if isinstance(module, Path):
                program = torch.export.load(str(module))
                torch.onnx.export(program, example, str(path), dynamo=True,
                                  external_data=False)
            else:
                torch.onnx.export(module, example, str(path), input_names=names,
                                  dynamic_axes=dynamic or None, dynamo=False)
    except Exception as e:
        raise ConfigError(f"exporting the PyTorch model to ONNX failed, so the ONNX runtimes "
                          f"cannot serve it: {str(e).strip().splitlines()[0][:300]}") from None


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
