"""What the entry downloads from the tracking store for a model's road (this imports MLflow):
a training run, looked up once (:func:`find_training_run`) and its files downloaded from the
run's own artifact location (:func:`download_run_model`), or the user's MLflow model
(:func:`download_mlflow_model`: the file to serve, and the inputs its signature and example
declare)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlflow_dlaas.backends.formats import file_in_mlflow_model, flavors_read
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.model_uri import ModelUri
from mlflow_dlaas.inference.sources.manifest import MODEL_DIR, ONNX_DIR
from mlflow_dlaas.redaction import redact_text
from mlflow_dlaas.runs.schema import FRAMEWORK_TAG


@dataclass(frozen=True)
class TrainingRunFound:
    """An mlflow-dlaas training run, as its one lookup found it."""

    run_id: str
    model: str
    input_shape: str
    num_classes: int
    framework: str
    artifact_uri: str


def find_training_run(uri: ModelUri) -> TrainingRunFound | None:
    """The training run ``uri`` names (``runs:/<id>`` of a run with the model / input_shape
    params), looked up once; None where it names a file inside some other run. A run that
    does not exist is an error where the URI names the run itself."""
    import mlflow
    from mlflow.exceptions import MlflowException

    run_id = uri.require_run()
    try:
        run = mlflow.MlflowClient().get_run(run_id)
    except MlflowException as e:
        if uri.run_path:
            return None  # its download says what is wrong with the URI
        raise ConfigError(redact_text(f"training run {run_id} does not exist in "
                                      f"{mlflow.get_tracking_uri()}: {e.message}")) from None
    params = run.data.params
    if "model" not in params or "input_shape" not in params:
        return None
    return TrainingRunFound(run_id, params["model"], params["input_shape"],
                            int(params.get("num_classes", "10")),
                            run.data.tags.get(FRAMEWORK_TAG, "unknown"), run.info.artifact_uri)


def download_run_model(run: TrainingRunFound, directory: Path, *, with_model: bool) -> None:
    """The run's ONNX export and reference (where it logged them) into ``directory``, and
    its saved model ``with_model`` (runtimes that load the framework's own format); read
    from the run's artifact location, without asking the store for the run again."""
    import mlflow
    from mlflow.exceptions import MlflowException

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # readable logs
    directory.mkdir(parents=True, exist_ok=True)
    for name in (ONNX_DIR, MODEL_DIR) if with_model else (ONNX_DIR,):
        with contextlib.suppress(MlflowException, OSError):  # runtimes needing it say so
            mlflow.artifacts.download_artifacts(
                artifact_uri=f"{run.artifact_uri.rstrip('/')}/{name}", dst_path=str(directory))


def download_mlflow_model(model_uri: str, directory: Path) -> tuple[Path, tuple[str, str, str]]:
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
    """The model file inside a downloaded MLflow model, by the flavors formats read."""
    found = file_in_mlflow_model(local, flavors)
    if found is not None:
        return found
    names = ", ".join(sorted(set(flavors) - {"python_function"})) or "python_function only"
    served = flavors_read()
    if served & set(flavors):
        raise ConfigError(f"model_uri {model_uri}: its {names} flavor holds no model file "
                          "this tool can open")
    raise ConfigError(f"model_uri {model_uri} has flavor(s) {names}; mlflow-dlaas serves the "
                      f"flavors {', '.join(sorted(served))}")
