"""The registry of model-file formats: each backend registers the kinds of file its framework
reads (``backends/<name>/formats.py``: suffixes, MLflow flavors, how to open one and export it
to ONNX), third parties through the entry-point group ``mlflow_dlaas.model_formats``
(``name = "package.module:FORMATS"``, a tuple of :class:`ModelFormat`).

A runtime serves a format natively where its ``consumes`` names the format's framework; a
runtime that consumes ONNX also serves every format with an ONNX export, exported first."""

from __future__ import annotations

from importlib import import_module, metadata
from pathlib import Path

from mlflow_dlaas.backends import available_runtimes, get_runtime
from mlflow_dlaas.backends.model_files import ModelFormat, article
from mlflow_dlaas.backends.onnx_files import ONNX
from mlflow_dlaas.backends.serving import InferenceRuntime
from mlflow_dlaas.errors import ConfigError

FORMAT_GROUP = "mlflow_dlaas.model_formats"
#: The built-in formats, in the order a file is tried against them: 'module:attribute'.
BUILT_IN = ("mlflow_dlaas.backends.onnx_files:FORMATS",
            "mlflow_dlaas.backends.pytorch.formats:FORMATS",
            "mlflow_dlaas.backends.tensorflow.formats:FORMATS")


def model_formats() -> tuple[ModelFormat, ...]:
    """Every registered format: the built-ins, then the installed plug-ins'."""
    found: list[ModelFormat] = []
    targets = [*BUILT_IN, *(e.value for e in metadata.entry_points(group=FORMAT_GROUP))]
    for target in targets:
        module, _, attribute = target.partition(":")
        found.extend(getattr(import_module(module), attribute))
    return tuple(found)


def format_of(path: Path) -> ModelFormat:
    """The format of the model at ``path``; a clear error when it is missing or unknown."""
    if not path.exists():
        raise ConfigError(f"model file {path} does not exist")
    formats = model_formats()
    for candidate in formats:
        if candidate.recognises(path):
            return candidate
    known = "; ".join(f.description for f in formats)
    if path.is_dir():
        raise ConfigError(f"{path} is a directory but no model this tool reads (a TensorFlow "
                          f"SavedModel holds saved_model.pb); give a model file: {known}")
    raise ConfigError(f"unknown model format {path.name!r}; give one of: {known}")


def serves_onnx(runtime: InferenceRuntime) -> bool:
    """Whether ``runtime`` loads ONNX files (and so every format with an ONNX export)."""
    return runtime.consumes == ONNX


def needs_onnx_export(model_format: ModelFormat, runtime: InferenceRuntime) -> bool:
    """Whether ``runtime`` serves ``model_format`` through its ONNX export."""
    return model_format.framework != runtime.consumes and serves_onnx(runtime)


def refusal(model_format: ModelFormat, runtime: InferenceRuntime) -> str | None:
    """Why ``runtime`` cannot serve a file of ``model_format`` (one line), or None."""
    if model_format.framework == runtime.consumes:
        return None
    if serves_onnx(runtime) and model_format.export_onnx is not None:
        missing = model_format.export_missing()
        if not missing:
            return None
        framework = model_format.framework
        return (f"the {runtime.name} runtime serves ONNX, and converting {article(framework)} "
                f"{framework} model to ONNX needs {missing}, which is not installed here (pip "
                f"install {missing}); serve it with the "
                f"{' or '.join(runtimes_serving(model_format, natively=True))} runtime")
    return (f"the {runtime.name} runtime cannot load {article(model_format.kind)} "
            f"{model_format.kind} model; serve it with "
            f"{' or '.join(runtimes_serving(model_format)) or 'a runtime that reads it'}")


def runtimes_serving(model_format: ModelFormat, *, natively: bool = False) -> list[str]:
    """The installed runtimes that serve ``model_format`` (natively: without an export)."""
    names = []
    for name in available_runtimes():
        runtime = get_runtime(name)
        if model_format.framework == runtime.consumes or (
                not natively and serves_onnx(runtime) and model_format.export_onnx):
            names.append(name)
    return names


def file_in_mlflow_model(folder: Path, flavors: dict) -> Path | None:
    """The model file a downloaded MLflow model holds, by its flavors, or None."""
    for model_format in model_formats():
        for flavor in model_format.flavors:
            if flavor in flavors and model_format.find_in_mlflow_model is not None:
                found = model_format.find_in_mlflow_model(folder, flavors[flavor])
                if found is not None:
                    return found
    return None


def flavors_read() -> set[str]:
    """The MLflow flavors some registered format reads."""
    return {flavor for f in model_formats() for flavor in f.flavors}
