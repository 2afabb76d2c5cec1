"""The tracking store's address: the variable that names it, the embedded default, its
credentials kept out of it, and whether an error means the store did not answer."""

from __future__ import annotations

import os
from pathlib import Path

from mlflow_dlaas.redaction import redact_uri
from mlflow_dlaas.store.database_bounds import is_postgres, stalled_database_reason

TRACKING_ENV = "MLFLOW_TRACKING_URI"
ACTIVE_ENV = "MLFLOW_DLAAS_ACTIVE"
EMBEDDED_DB = "mlflow.db"
#: MLflow's switch for its "View run ... at: URL" lines.
SUPPRESS_URL_ENV = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"
#: How :func:`~mlflow_dlaas.store.database_bounds.stalled_database_reason` begins for a
#: database that is frozen or gone (a lock or statement timeout is an answer).
DATABASE_AWAY = ("stopped answering", "went away")


def embedded_uri(directory: Path | None = None) -> str:
    """The SQLite URI of the embedded store in ``directory`` (default: the working directory).

    Artifacts go where MLflow puts them for such a store: ``./mlruns`` beside it.
    """
    return f"sqlite:///{(directory or Path.cwd()).resolve() / EMBEDDED_DB}"


def quiet_run_links(uri: str) -> None:
    """Switch off MLflow's "View run ... at: URL" lines when ``uri`` carries credentials:
    MLflow prints the tracking server's address as given, password and all (children
    inherit the setting)."""
    if redact_uri(uri) != uri:
        os.environ[SUPPRESS_URL_ENV] = "true"


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` says the server did not answer (refused, timed out, reset, 5xx after
    retries) rather than refused the request itself."""
    import requests

    if (stalled_database_reason(error) or "").startswith(DATABASE_AWAY):
        return True
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (requests.exceptions.RequestException, ConnectionError,
                                TimeoutError)):
            return True
        current = current.__cause__ or current.__context__
    return False


def went_silent(error: BaseException) -> bool:
    """Whether ``error`` ended a wait for a store that took the request and never answered
    (frozen), rather than one that refused it at once (down)."""
    import requests

    if (stalled_database_reason(error) or "").startswith("stopped answering"):
        return True
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (requests.exceptions.Timeout, TimeoutError)):
            return True
        current = current.__cause__ or current.__context__
    return False


def store_noun(uri: str) -> str:
    """How the console names the tracking store at ``uri``."""
    return "the tracking store" if is_postgres(uri) else "the tracking server"
