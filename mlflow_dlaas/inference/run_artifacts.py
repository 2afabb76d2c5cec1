"""Fetch a training run's model for the measured worker (entry side: this imports MLflow)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.source import MODEL_DIR, ONNX_DIR, SOURCE_FILE, run_id_from
from mlflow_dlaas.tracking import redact_text


def fetch_run_model(model_uri: str, directory: Path, *, with_model: bool) -> Path:
    """Download what serving ``model_uri`` needs into ``directory``; returns ``directory``.

    Always the ONNX export and reference outputs (when the run has them); the saved model
    itself only ``with_model`` (runtimes that load the framework's own format).
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # readable logs
    run_id = run_id_from(model_uri)
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
             "framework": run.data.tags.get("dlaas.framework", "unknown")}
    (directory / SOURCE_FILE).write_text(json.dumps(about))
    return directory
