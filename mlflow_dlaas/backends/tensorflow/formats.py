"""TensorFlow's model files (a Keras ``.keras`` file, a SavedModel directory): recognising and
reading one, its declared inputs, and its export to ONNX (tf2onnx) for the ONNX runtimes.
Registered as :data:`FORMATS`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends.feed import Feed
from mlflow_dlaas.backends.model_files import (
    Dtypes,
    ModelFormat,
    OpenedModel,
    Shapes,
    resolve_inputs,
    unreadable,
)
from mlflow_dlaas.backends.served_model import InputSpec
from mlflow_dlaas.errors import ConfigError


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
        raise unreadable(path, f"TensorFlow ({kind})", e) from None
    _, named = signature.structured_input_signature
    declared = [(name, list(spec.shape), spec.dtype.name) for name, spec in named.items()]

    def call(**x: Any) -> Any:
        return signature(**x)

    call.owner = loaded  # type: ignore[attr-defined]  # its variables live while call does
    return call, declared



def open_keras(kind: str, path: Path, shapes: Shapes, dtypes: Dtypes) -> OpenedModel:
    """A Keras file's or SavedModel's inputs, and its outputs in TensorFlow as the
    reference; its handle is the callable the ONNX export traces."""
    import os

    from mlflow_dlaas.backends.tensorflow.training import quiet_environment

    os.environ.update(quiet_environment())
    import tensorflow as tf

    call, declared = load_keras(tf, kind, path)
    specs = resolve_inputs(declared, shapes, dtypes, origin=f"{kind} model {path.name}")

    def reference(feed: Feed) -> np.ndarray:
        return first_output_tf(call(**{s.name: tf.constant(feed[s.name]) for s in specs}))

    return OpenedModel(specs, reference, call)


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


def _export(path: Path, opened: OpenedModel, feed: Feed, out: Path) -> None:
    export_keras(opened.handle, opened.inputs, out)


def _keras_in_mlflow_model(folder: Path, flavor: dict) -> Path | None:
    found = sorted(folder.rglob("*.keras"))
    return found[0] if found else None


def _savedmodel_in_mlflow_model(folder: Path, flavor: dict) -> Path | None:
    found = sorted(folder.rglob("saved_model.pb"))
    return found[0].parent if found else None


FORMATS = (
    ModelFormat("keras", "tensorflow", "a Keras .keras file",
                recognises=lambda path: path.is_file() and path.suffix.lower() in (".keras",
                                                                                   ".h5"),
                open=lambda path, shapes, dtypes: open_keras("keras", path, shapes, dtypes),
                export_onnx=_export, export_needs="tf2onnx", flavors=("keras", "tensorflow"),
                find_in_mlflow_model=_keras_in_mlflow_model),
    ModelFormat("savedmodel", "tensorflow", "a TensorFlow SavedModel directory",
                recognises=lambda path: path.is_dir() and (path / "saved_model.pb").is_file(),
                open=lambda path, shapes, dtypes: open_keras("savedmodel", path, shapes,
                                                             dtypes),
                export_onnx=_export, export_needs="tf2onnx", flavors=("keras", "tensorflow"),
                find_in_mlflow_model=_savedmodel_in_mlflow_model),
)
