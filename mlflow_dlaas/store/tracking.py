"""Where runs are tracked: MLFLOW_TRACKING_URI when set, else an embedded SQLite store here."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from mlflow_dlaas.console_log import console
from mlflow_dlaas.errors import TrackingUnavailableError
from mlflow_dlaas.redaction import redact_text, redact_uri
from mlflow_dlaas.store.database_bounds import bound_database_waits, connect_args, is_postgres
from mlflow_dlaas.store.store_lock import initialise_tracking_store
from mlflow_dlaas.store.store_uri import (
    ACTIVE_ENV,
    TRACKING_ENV,
    embedded_uri,
    quiet_run_links,
)

log = console(__name__)

#: How long a command waits for a tracking server or database that does not answer (MLflow
#: itself retries for minutes).
CONNECT_WITHIN_S = 10.0
#: Network stores by scheme (a SQLAlchemy driver suffix ignored), and their default ports
#: (Redis: a study's journal).
NETWORK_STORES = {"http": 80, "https": 443, "postgresql": 5432, "mysql": 3306, "mssql": 1433,
                  "redis": 6379, "rediss": 6379}
DATABASES = ("postgresql", "mysql", "mssql")


@dataclass(frozen=True)
class TrackingTarget:
    """The tracking URI in force and whether it is the embedded default."""

    uri: str
    embedded: bool

    def ui_command(self) -> str:
        """The ``mlflow ui`` command that shows these runs (credentials hidden)."""
        shown = redact_uri(self.uri)
        if self.uri.startswith(("http://", "https://")):
            return f"open {shown} in a browser"
        return f"mlflow ui --backend-store-uri {shown}"


_ANNOUNCED: set[str] = set()
_OPENED: set[str] = set()


def configure_tracking(*, announce: bool = True, say_where: bool = True) -> TrackingTarget:
    """Honour MLFLOW_TRACKING_URI, else select the embedded store; mark runs as ours.

    Once per process and store: a new SQLite store is initialised under a file lock, and a
    command (``announce``) ends the runs whose owner on this host died (:mod:`.run_ending`)
    and, where it will log runs (``say_where``), says where they go and how to browse them.

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
    check_reachable(target.uri)
    quiet_run_links(target.uri)
    bound_database_waits(target.uri)
    mlflow.set_tracking_uri(target.uri)
    if target.uri.startswith(("http://", "https://")):
        from mlflow_dlaas.store.journaled_store import journal_runs_sent_to

        journal_runs_sent_to(target.uri)
    elif is_postgres(target.uri):
        from mlflow_dlaas.store.journaled_sql_store import journal_runs_written_to_database

        journal_runs_written_to_database(target.uri)
    # once per process (the demo calls it often)
    if announce and say_where and target.uri not in _ANNOUNCED:
        _ANNOUNCED.add(target.uri)
        where = "embedded default" if target.embedded else "from MLFLOW_TRACKING_URI"
        log.info(f"mlflow-dlaas: tracking runs in {redact_uri(target.uri)} ({where})")
        log.info(f"mlflow-dlaas: to browse them: {target.ui_command()}")
    if target.uri not in _OPENED:
        _OPENED.add(target.uri)
        initialise_tracking_store(target.uri)
        if announce:  # a command opening the store, not a workload under one
            from mlflow_dlaas.store.run_ending import end_runs_of_dead_owners

            end_runs_of_dead_owners(mlflow.MlflowClient())
    return target


#: What to do when the tracking store does not answer.
TRACKING_FIX = (f"start it, fix {TRACKING_ENV}, or unset it to track in the embedded store "
                "here")


def check_reachable(uri: str, *, within_s: float = CONNECT_WITHIN_S,
                    role: str = "tracking store", fix: str = TRACKING_FIX) -> None:
    """Raise :class:`TrackingUnavailableError` within about ``within_s`` when the server or
    database of ``uri`` (the ``role`` it plays) does not accept a connection; a database
    must also let us in within the time left. Local stores (SQLite, files) pass at once."""
    parts = urlsplit(uri)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in NETWORK_STORES or not parts.hostname:
        return
    try:
        port = parts.port or NETWORK_STORES[scheme]
    except ValueError:  # a malformed port: MLflow's own error says it
        return
    deadline = time.monotonic() + within_s
    while True:
        try:
            socket.create_connection((parts.hostname, port),
                                     timeout=max(deadline - time.monotonic(), 1.0)).close()
            break
        except OSError as e:
            if time.monotonic() + 1.0 >= deadline:
                raise TrackingUnavailableError(
                    f"cannot reach the {role} {redact_uri(uri)} within {within_s:.0f} s "
                    f"({e.strerror or e}); {fix}") from None
            time.sleep(1.0)
    if scheme in DATABASES:
        _check_login(uri, max(deadline - time.monotonic(), 1.0), role, fix)
    elif scheme in ("http", "https"):
        _check_answers(uri, max(deadline - time.monotonic(), 1.0), role, fix)


def _check_answers(uri: str, within_s: float, role: str, fix: str) -> None:
    """One HTTP request to the server, bounded by ``within_s``: any answer will do (MLflow
    itself waits two minutes a request, and retries, on a server that accepted the socket and
    hangs)."""
    import requests

    try:
        requests.get(f"{uri.rstrip('/')}/health", timeout=within_s)
    except requests.exceptions.Timeout:
        raise TrackingUnavailableError(
            f"the {role} {redact_uri(uri)} accepted the connection but did not answer "
            f"within {within_s:.0f} s; {fix}") from None
    except requests.exceptions.RequestException as e:
        said = redact_text(str(e)).strip().splitlines()
        raise TrackingUnavailableError(
            f"the {role} {redact_uri(uri)} did not answer: "
            f"{said[0] if said else type(e).__name__}; {fix}") from None


def _check_login(uri: str, within_s: float, role: str, fix: str) -> None:
    """One connection to the database, bounded by ``within_s``: MLflow retries a refused
    login for minutes, and a silent server holds a connection attempt for longer."""
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(uri, poolclass=sqlalchemy.pool.NullPool,
                                          connect_args=connect_args(uri, within_s))
    except ImportError as e:
        raise TrackingUnavailableError(f"the database driver for {redact_uri(uri)} is not "
                                       f"installed ({e}); install the driver the URI names, "
                                       "e.g. postgresql+psycopg:// with psycopg") from None
    started = time.monotonic()
    try:
        with engine.connect():
            pass
    except Exception as e:  # a driver's own error: say it in one line, without credentials
        reason = redact_text(str(getattr(e, "orig", None) or e)).strip().splitlines()
        said = reason[0] if reason else type(e).__name__
        if time.monotonic() - started >= within_s - 0.5:
            raise TrackingUnavailableError(
                f"the {role} {redact_uri(uri)} accepted the connection but did not answer "
                f"within {within_s:.0f} s ({said}); {fix}") from None
        if "connection refused" in said.lower():  # nothing listens: the server is down
            raise TrackingUnavailableError(
                f"the {role} {redact_uri(uri)} does not answer (connection refused): {fix}"
            ) from None
        raise TrackingUnavailableError(
            f"the {role} {redact_uri(uri)} refused the connection: {said}; check the user, "
            "password and database name in its URI") from None
    finally:
        engine.dispose()
