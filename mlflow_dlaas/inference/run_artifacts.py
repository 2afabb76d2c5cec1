"""Fetch a training run's model, or the user's own, for the measured worker (entry side: this
imports MLflow)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from mlflow_dlaas.errors import ConfigError, WorkloadError
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.model_uri import parse_model_uri
from mlflow_dlaas.inference.source import MODEL_DIR, ONNX_DIR, SOURCE_FILE
from mlflow_dlaas.inference.text_model import ABOUT_FILE as TEXT_ABOUT_FILE
from mlflow_dlaas.inference.text_model import DATA_FILE as TEXT_DATA_FILE
from mlflow_dlaas.inference.text_model import MODEL_FILE as TEXT_MODEL_FILE
from mlflow_dlaas.inference.text_model import input_flags
from mlflow_dlaas.redaction import redact_text
from mlflow_dlaas.runs.schema import FRAMEWORK_TAG


def fetch_run_model(model_uri: str, directory: Path, *, with_model: bool) -> Path:
    """Download what serving ``model_uri`` needs into ``directory``; returns ``directory``.

    Always the ONNX export and reference outputs (when the run has them); the saved model
    itself only ``with_model`` (runtimes that load the framework's own format).
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # readable logs
    run_id = parse_model_uri(model_uri).require_run()
    try:
        run = mlflow.MlflowClient().get_run(run_id)
    except MlflowException as e:
        raise ConfigError(redact_text(f"training run {run_id} does not exist in "
                                      f"{mlflow.get_tracking_uri()}: {e.message}")) from None
    params = run.data.params
    if "model" not in params or "input_shape" not in params:
        raise ConfigError(f"run {run_id} is not an mlflow-dlaas training run (no model / "
                          "input_shape params)")
    directory.mkdir(parents=True, exist_ok=True)
    for name in (ONNX_DIR, MODEL_DIR) if with_model else (ONNX_DIR,):
        with contextlib.suppress(MlflowException, OSError):  # runtimes needing it say so
            mlflow.artifacts.download_artifacts(artifact_uri=f"runs:/{run_id}/{name}",
                                                dst_path=str(directory))
    about = {"run_id": run_id, "model": params["model"], "input_shape": params["input_shape"],
             "num_classes": params.get("num_classes", "10"),
             "framework": run.data.tags.get(FRAMEWORK_TAG, "unknown")}
    (directory / SOURCE_FILE).write_text(json.dumps(about))
    return directory


def is_training_run(model_uri: str) -> bool:
    """Whether ``model_uri`` names an mlflow-dlaas training run (``runs:/<id>[/...]`` of a
    run with the model / input_shape params), which the training-run path serves."""
    import mlflow
    from mlflow.exceptions import MlflowException

    uri = parse_model_uri(model_uri)
    if uri.kind != "run":
        return False
    try:
        params = mlflow.MlflowClient().get_run(uri.run_id).data.params
    except MlflowException:
        return not uri.run_path  # the run itself: its fetch says "does not exist"
    return "model" in params and "input_shape" in params


def prepare_user_model(config: InferConfig, runtime: str, consumes: str,
                       directory: Path) -> None:
    """The user's own model into ``directory``: download an MLflow model (its signature and
    input example fill input_shape / input_dtype / input_data the user left out), then open
    it in its own framework in a process of its own (``user_model``)."""
    shape, dtype, data = config.input_shape, config.input_dtype, config.input_data
    path = parse_model_uri(config.model_uri).path
    if path is None:
        path, found = _download_mlflow_model(config.model_uri, directory / "download")
        shape, dtype, data = shape or found[0], dtype or found[1], data or found[2]
    _open_model_file(path, config, runtime, consumes, directory, (shape, dtype, data),
                     config.model_uri)


def prepare_text_model(config: InferConfig, runtime: str, consumes: str,
                       directory: Path) -> None:
    """A text model (``bert_base``) built with random weights in a process of its own
    (``text_model``), then opened as a user's TorchScript file is, with its synthetic_text
    data; ``source.json`` also says its name, parameters and FLOPs per sample."""
    built = directory / "text_model"
    command = [sys.executable, "-m", "mlflow_dlaas.inference.text_model", "--model",
               config.model, "--sequence_length", str(config.sequence_length), "--seed",
               str(config.seed), "--out", str(built)]
    _run_preparation(command, f"building {config.model}")
    shape, dtype = input_flags(config.sequence_length)
    _open_model_file(built / TEXT_MODEL_FILE, config, runtime, consumes, directory,
                     (shape, dtype, str(built / TEXT_DATA_FILE)), config.model)
    about = json.loads((directory / SOURCE_FILE).read_text())
    built_about = json.loads((built / TEXT_ABOUT_FILE).read_text())
    about.update(model=config.model, parameter_count=built_about["parameter_count"],
                 forward_flops=built_about["forward_flops"])
    (directory / SOURCE_FILE).write_text(json.dumps(about))


def _open_model_file(path: Path, config: InferConfig, runtime: str, consumes: str,
                     directory: Path, inputs: tuple[str, str, str], what: str) -> None:
    """Open a model file in its own framework, in a process of its own (``user_model``):
    ``inputs`` are its (input_shape, input_dtype, input_data)."""
    shape, dtype, data = inputs
    command = [sys.executable, "-m", "mlflow_dlaas.inference.user_model", "--model", str(path),
               "--runtime", runtime, "--consumes", consumes, "--out", str(directory),
               "--seed", str(config.seed), "--input_shape", shape, "--input_dtype", dtype,
               "--input_data", data,
               "--copies", str(_copies(config))]
    _run_preparation(command, f"opening {what}")


def _run_preparation(command: list[str], doing: str) -> None:
    """Run a preparing process: its ConfigError's line is ours, any other failure a
    WorkloadError with its output's end."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode == ConfigError.exit_code:
        raise ConfigError(done.stderr.strip().splitlines()[-1])
    if done.returncode != 0:
        raise WorkloadError(f"{doing} failed: {done.stderr.strip()[-2000:]}")


def _copies(config: InferConfig) -> int:
    """Copies of the model held at once: an ensemble's, or the worker's and each instance's."""
    ensemble = config.ensemble_size if "ensemble" in config.scenarios else 1
    return max(ensemble, config.instances + 1 if config.instances > 1 else 1)


def _download_mlflow_model(model_uri: str, directory: Path) -> tuple[Path, tuple[str, str, str]]:
    """Download an MLflow model; the file to serve and (input_shape, input_dtype,
    input_data) from its signature and input example ('' where it has none)."""
    import mlflow
    from mlflow.exceptions import MlflowException
    from mlflow.models import Model

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    directory.mkdir(parents=True, exist_ok=True)
    try:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=model_uri,
                                                         dst_path=str(directory)))
    except (MlflowException, OSError) as e:
        message = getattr(e, "message", str(e)).strip().splitlines()[0]
        raise ConfigError(redact_text(f"model_uri {model_uri}: cannot download it from "
                                      f"{mlflow.get_tracking_uri()}: {message}")) from None
    if local.is_file():  # an artifact that is itself the model file (model.onnx, ...)
        return local, ("", "", "")
    if not (local / "MLmodel").is_file():
        raise ConfigError(f"model_uri {model_uri} is neither a model file nor an MLflow model "
                          "(no MLmodel file)")
    model = Model.load(str(local))
    path = _flavor_file(model_uri, model.flavors, local)
    shape = dtype = data = ""
    if model.signature is not None and model.signature.inputs is not None:
        specs = [s for s in model.signature.inputs.inputs if hasattr(s, "shape")]
        named = len(specs) > 1 or any(getattr(s, "name", None) for s in specs)
        shapes, dtypes = [], []
        for s in specs:
            dims = list(s.shape)[1:]
            prefix = f"{s.name}:" if named and s.name else ""
            if dims and all(d > 0 for d in dims):
                shapes.append(prefix + "x".join(map(str, dims)))
            dtypes.append(prefix + s.type.name)
        shape, dtype = ",".join(shapes), ",".join(dtypes)
    with contextlib.suppress(Exception):  # an example that cannot be read is no input
        example = model.load_input_example(str(local))
        if example is not None:
            arrays = example if isinstance(example, dict) else {"input": example}
            arrays = {k: np.asarray(v) for k, v in arrays.items()}
            data = str(directory / "input_example.npz")
            np.savez(data, **arrays)
            if not shape and all(a.ndim > 1 for a in arrays.values()):  # no signature shapes
                shape = ",".join(f"{k}:" * isinstance(example, dict)
                                 + "x".join(map(str, a.shape[1:])) for k, a in arrays.items())
    return path, (shape, dtype, data)


def _flavor_file(model_uri: str, flavors: dict, local: Path) -> Path:
    """The model file inside a downloaded MLflow model, by flavor."""
    if "onnx" in flavors:
        return local / flavors["onnx"].get("data", "model.onnx")
    if "pytorch" in flavors:
        data = local / flavors["pytorch"].get("model_data", "data")
        found = sorted(data.glob("*.pt2")) or sorted(data.glob("*.pth"))
        if found:
            return found[0]
    if "keras" in flavors or "tensorflow" in flavors:
        found = sorted(local.rglob("*.keras")) or [p.parent for p in local.rglob("saved_model.pb")]
        if found:
            return found[0]
    served = {"onnx", "pytorch", "keras", "tensorflow"}
    names = ", ".join(sorted(set(flavors) - {"python_function"})) or "python_function only"
    if served & set(flavors):
        raise ConfigError(f"model_uri {model_uri}: its {names} flavor holds no model file "
                          "this tool can open")
    raise ConfigError(f"model_uri {model_uri} has flavor(s) {names}; mlflow-dlaas serves "
                      "onnx, pytorch and tensorflow / keras models")
