"""Links from a trial (in optuna-dashboard) to its MLflow run in the MLflow UI."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import mlflow

#: Where the MLflow UI is, when the tracking URI is not a server (SQLite, files).
UI_URL_ENV = "MLFLOW_DLAAS_UI_URL"
#: ``mlflow ui``'s default address.
DEFAULT_UI_URL = "http://127.0.0.1:5000"


def ui_base_url() -> str:
    """The MLflow UI's address: :data:`UI_URL_ENV` when set, else the tracking server's
    address (an http(s) tracking URI), else ``mlflow ui``'s default. Credentials, query and
    fragment are left out."""
    uri = os.environ.get(UI_URL_ENV) or mlflow.get_tracking_uri()
    if not uri.startswith(("http://", "https://")):
        return DEFAULT_UI_URL
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def run_url(experiment_id: str, run_id: str) -> str:
    """The MLflow UI page of a run."""
    return f"{ui_base_url()}/#/experiments/{experiment_id}/runs/{run_id}"
