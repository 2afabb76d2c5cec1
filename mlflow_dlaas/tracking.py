"""Where runs are tracked: MLFLOW_TRACKING_URI when set, else an embedded SQLite store here."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

TRACKING_ENV = "MLFLOW_TRACKING_URI"
ACTIVE_ENV = "MLFLOW_DLAAS_ACTIVE"
EMBEDDED_DB = "mlflow.db"


@dataclass(frozen=True)
class TrackingTarget:
    """The tracking URI in force and whether it is the embedded default."""

    uri: str
    embedded: bool

    def ui_command(self) -> str:
        """The ``mlflow ui`` command that shows these runs."""
        if self.uri.startswith(("http://", "https://")):
            return f"open {self.uri} in a browser"
        return f"mlflow ui --backend-store-uri {self.uri}"


def embedded_uri(directory: Path | None = None) -> str:
    """The SQLite URI of the embedded store in ``directory`` (default: the working directory).

    Artifacts go where MLflow puts them for such a store: ``./mlruns`` beside it.
    """
    return f"sqlite:///{(directory or Path.cwd()).resolve() / EMBEDDED_DB}"


_ANNOUNCED: set[str] = set()


def configure_tracking(*, announce: bool = True) -> TrackingTarget:
    """Honour MLFLOW_TRACKING_URI, else select the embedded store; mark runs as ours.

    Sets the environment (inherited by every child process) rather than only the
    in-process MLflow state, so that trial and workload subprocesses log to the same store.
    """
    import mlflow

    os.environ[ACTIVE_ENV] = "1"
    uri = os.environ.get(TRACKING_ENV)
    target = TrackingTarget(uri=uri, embedded=False) if uri else None
    if target is None:
        target = TrackingTarget(uri=embedded_uri(), embedded=True)
        os.environ[TRACKING_ENV] = target.uri
    mlflow.set_tracking_uri(target.uri)
    if announce and target.uri not in _ANNOUNCED:  # once per process (the demo calls it often)
        _ANNOUNCED.add(target.uri)
        where = "embedded default" if target.embedded else "from MLFLOW_TRACKING_URI"
        print(f"mlflow-dlaas: tracking runs in {redact_uri(target.uri)} ({where})", file=sys.stderr)
        print(f"mlflow-dlaas: to browse them: {redact_uri(target.ui_command())}", file=sys.stderr)
    return target


def ensure_experiment(name: str) -> str:
    """Return the id of experiment ``name``, creating it if absent (safe under concurrency)."""
    import mlflow

    client = mlflow.MlflowClient()
    existing = client.get_experiment_by_name(name)
    if existing is not None:
        return existing.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:  # created concurrently by another worker
        again = client.get_experiment_by_name(name)
        if again is None:
            raise
        return again.experiment_id


def redact_uri(uri: str) -> str:
    """Hide credentials in a URI: ``user:secret@`` keeps the user, a bare ``token@`` is masked
    whole, and a query string (``?password=``, ``?token=``) is dropped."""
    if "://" not in uri:
        return uri
    scheme, rest = uri.split("://", 1)
    rest = rest.split("?", 1)[0]
    if "@" not in rest:
        return f"{scheme}://{rest}"
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://***@{host}"

