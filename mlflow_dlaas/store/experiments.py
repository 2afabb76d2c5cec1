"""The experiments our runs go to: made once whatever the concurrency, and marked as model
development so that MLflow's UI opens them in its training view."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlflow.entities import Experiment

#: What the experiment holds, for MLflow's API and for a UI that reads it. MLflow 3.17's UI
#: does not: it opens in its GenAI view unless the address asks for the training view
#: (:data:`mlflow_dlaas.runs.ui_links.TRAINING_VIEW`, on every link we print).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_DEVELOPMENT = "custom_model_development"


def ensure_experiment(name: str) -> str:
    """Return the id of experiment ``name``, creating it if absent (safe under concurrency),
    marked as model development for MLflow's UI."""
    import mlflow

    client = mlflow.MlflowClient()
    existing = client.get_experiment_by_name(name)
    if existing is None:
        try:
            client.create_experiment(name, tags={EXPERIMENT_KIND_TAG: MODEL_DEVELOPMENT})
        except Exception:  # created concurrently by another worker
            if client.get_experiment_by_name(name) is None:
                raise
        existing = client.get_experiment_by_name(name)
    mark_model_development(existing)
    return existing.experiment_id


def mark_model_development(experiment: Experiment) -> None:
    """Tag ``experiment`` as model development for MLflow's UI,
    unless it has a kind already (the user's, or ours)."""
    import mlflow

    if EXPERIMENT_KIND_TAG not in (experiment.tags or {}):
        with contextlib.suppress(Exception):  # a read-only user: the view is cosmetic
            mlflow.MlflowClient().set_experiment_tag(experiment.experiment_id,
                                                     EXPERIMENT_KIND_TAG, MODEL_DEVELOPMENT)
