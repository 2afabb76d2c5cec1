"""Links to a run's page in the MLflow UI (optuna-dashboard's trial notes, the report's
evidence, the claims report): on the tracking server where it is one, else where
``MLFLOW_DLAAS_UI_URL`` says the UI runs (``mlflow ui --port 5001`` beside a SQLite store),
else ``mlflow ui``'s default address."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

#: Where the MLflow UI is: named in the README and in the help of every command that links.
UI_URL_ENV = "MLFLOW_DLAAS_UI_URL"
#: ``mlflow ui``'s default address.
DEFAULT_UI_URL = "http://127.0.0.1:5000"
#: MLflow 3.17's UI opens every experiment in its GenAI view (traces, judges, "evaluation
#: runs") unless the page's address or the browser's stored choice says otherwise; the
#: experiment's ``mlflow.experimentKind`` tag does not change that. Our links ask for the
#: model-training view.
TRAINING_VIEW = "?workflowType=machine_learning"


def ui_base_url(tracking_uri: str | None = None) -> str:
    """The MLflow UI's address: :data:`UI_URL_ENV` when set, else the tracking server's
    (``tracking_uri``, else MLflow's current one, where it is http(s)), else ``mlflow ui``'s
    default. Credentials, query and fragment are left out."""
    if tracking_uri is None and not os.environ.get(UI_URL_ENV):
        import mlflow

        tracking_uri = mlflow.get_tracking_uri()
    uri = os.environ.get(UI_URL_ENV) or tracking_uri or ""
    if not uri.startswith(("http://", "https://")):
        return DEFAULT_UI_URL
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def run_url(experiment_id: str, run_id: str, tracking_uri: str | None = None) -> str:
    """The MLflow UI page of a run, in the model-training view."""
    return (f"{ui_base_url(tracking_uri)}/#/experiments/{experiment_id}/runs/{run_id}"
            f"{TRAINING_VIEW}")


def experiment_url(experiment_id: str, tracking_uri: str | None = None) -> str:
    """The MLflow UI's list of an experiment's runs, in the model-training view."""
    return f"{ui_base_url(tracking_uri)}/#/experiments/{experiment_id}/runs{TRAINING_VIEW}"
