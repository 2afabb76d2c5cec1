"""The entry's side of a model's road: the folder the measured worker reads its model from
(:mod:`.load`), filled per the :mod:`.plan` in processes of their own where a framework other
than the runtime must open or build the model, so that none of it is loaded where the runtime
is measured. Their errors come back typed
(:func:`~mlflow_dlaas.measured_process.helper.run_helper`)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from mlflow_dlaas.backends import InferenceRuntime
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.sources.fetch import download_mlflow_model, download_run_model
from mlflow_dlaas.inference.sources.manifest import SourceManifest
from mlflow_dlaas.inference.sources.plan import (
    Fresh,
    SourcePlan,
    TextModel,
    TrainingRun,
    UserFile,
)
from mlflow_dlaas.inference.text_model import ABOUT_FILE as TEXT_ABOUT_FILE
from mlflow_dlaas.inference.text_model import DATA_FILE as TEXT_DATA_FILE
from mlflow_dlaas.inference.text_model import MODEL_FILE as TEXT_MODEL_FILE
from mlflow_dlaas.inference.text_model import input_flags
from mlflow_dlaas.measured_process.helper import run_helper

PACKAGE = "mlflow_dlaas.inference.sources"


def prepare_source(plan: SourcePlan, config: InferConfig, runtime: InferenceRuntime,
                   directory: Path) -> bool:
    """Fill ``directory`` for ``plan``; False where there is nothing to prepare (a fresh
    model the worker's runtime builds itself)."""
    if isinstance(plan, Fresh):
        if not plan.exported:
            return False
        run_helper(f"{PACKAGE}.fresh", ["--model", config.model, "--seed", str(config.seed),
                                        "--input_shape", config.input_shape,
                                        "--out", str(directory)],
                   f"exporting {config.model} to ONNX")
    elif isinstance(plan, TrainingRun):
        download_run_model(plan.run, directory, with_model=plan.with_model)
        SourceManifest("training_run", plan.run.model, plan.run.framework,
                       _shape(plan.run.input_shape), plan.run.num_classes,
                       run_id=plan.run.run_id).write(directory)
    elif isinstance(plan, UserFile):
        _prepare_user_file(plan, config, runtime, directory)
    else:
        _prepare_text_model(plan, config, runtime, directory)
    return True


def _prepare_user_file(plan: UserFile, config: InferConfig, runtime: InferenceRuntime,
                       directory: Path) -> None:
    """The user's file, or an MLflow model downloaded first (its signature and input example
    fill the input_shape / input_dtype / input_data the user left out), opened in its own
    framework."""
    shape, dtype, data = config.input_shape, config.input_dtype, config.input_data
    path = plan.uri.path
    if path is None:
        path, found = download_mlflow_model(plan.uri.text, directory / "download")
        shape, dtype, data = shape or found[0], dtype or found[1], data or found[2]
    _open_model_file(path, config, runtime, directory, (shape, dtype, data), plan.uri.text)


def _prepare_text_model(plan: TextModel, config: InferConfig, runtime: InferenceRuntime,
                        directory: Path) -> None:
    """A text model built with random weights in a process of its own, then opened as a
    user's TorchScript file is, with its synthetic text; the manifest also says its name,
    parameters and FLOPs per sample."""
    built = directory / "text_model"
    run_helper("mlflow_dlaas.inference.text_model",
               ["--model", plan.name, "--sequence_length", str(config.sequence_length),
                "--seed", str(config.seed), "--out", str(built)], f"building {plan.name}")
    shape, dtype = input_flags(config.sequence_length)
    _open_model_file(built / TEXT_MODEL_FILE, config, runtime, directory,
                     (shape, dtype, str(built / TEXT_DATA_FILE)), plan.name)
    about = json.loads((built / TEXT_ABOUT_FILE).read_text())
    opened = SourceManifest.read(directory)
    replace(opened, road="text", model=plan.name, parameter_count=about["parameter_count"],
            forward_flops=about["forward_flops"]).write(directory)


def _open_model_file(path: Path, config: InferConfig, runtime: InferenceRuntime,
                     directory: Path, inputs: tuple[str, str, str], what: str) -> None:
    """Open a model file in its own framework, in a process of its own: ``inputs`` are its
    (input_shape, input_dtype, input_data)."""
    shape, dtype, data = inputs
    run_helper(f"{PACKAGE}.user_files",
               ["--model", str(path), "--runtime", runtime.name, "--out", str(directory),
                "--seed", str(config.seed), "--input_shape", shape, "--input_dtype", dtype,
                "--input_data", data, "--copies", str(_copies(config))], f"opening {what}")


def _copies(config: InferConfig) -> int:
    """Copies of the model held at once: an ensemble's, or the worker's and each instance's."""
    ensemble = config.ensemble_size if "ensemble" in config.scenarios else 1
    return max(ensemble, config.instances + 1 if config.instances > 1 else 1)


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split("x"))
