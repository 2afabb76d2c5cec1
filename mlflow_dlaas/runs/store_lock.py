"""A new tracking store initialised once, under a lock, before concurrent users touch it.

Several processes opening a fresh database at once (study workers, monitors, trial
processes) each see no tables, each run the migrations, and all but one fail ("table
already exists" on SQLite, ``UniqueViolation ... alembic_version`` on PostgreSQL). Each of
our processes first takes an exclusive lock and opens the store while holding it: the
first one creates the tables, the others wait for it and find them. A SQLite file is locked
with ``fcntl.flock`` on ``<file>.lock`` beside it, a PostgreSQL database with a
session-level advisory lock; a tracking server serialises its own store.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX: no lock, as before
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def first_use_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<path>.lock`` (created if absent) for the block."""
    lock = Path(f"{path}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` URI; None for other stores and in-memory."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


#: The advisory lock's key on a PostgreSQL tracking database ("dlaas-init" as a number).
ADVISORY_LOCK_KEY = 0x646C6161732D69
#: How long a PostgreSQL connection may take to open, and a statement (the lock's wait
#: included) to run, in seconds.
POSTGRES_CONNECT_TIMEOUT_S = 10
POSTGRES_LOCK_TIMEOUT_S = 120


#: How long a SQLite writer waits for another's lock before "database is locked". Python's
#: sqlite3 waits 5 s, which a busy 2-core machine exceeded with a study's driver, its trial's
#: entry and monitor writing one store (seen in the suite).
SQLITE_BUSY_TIMEOUT_S = 60


def wait_for_sqlite_locks() -> None:
    """Make every SQLite connection this process opens through SQLAlchemy (MLflow's store,
    Optuna's) wait :data:`SQLITE_BUSY_TIMEOUT_S` for a lock; idempotent."""
    import sqlalchemy

    if not sqlalchemy.event.contains(sqlalchemy.engine.Engine, "connect", _sqlite_busy_timeout):
        sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", _sqlite_busy_timeout)


def _sqlite_busy_timeout(connection: Any, _record: Any) -> None:
    if isinstance(connection, sqlite3.Connection):
        connection.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")


def initialise_tracking_store(uri: str) -> None:
    """Open MLflow's store at ``uri`` under the lock when it is a SQLite file or a
    PostgreSQL database (the first opener creates the tables; MLflow caches the opened
    store for the process)."""
    path = sqlite_path(uri)
    if path is not None:
        wait_for_sqlite_locks()
        with first_use_lock(path):
            _open_store(uri)
    elif uri.split(":", 1)[0].split("+", 1)[0] in ("postgresql", "postgres"):
        with postgres_advisory_lock(uri):
            _open_store(uri)


@contextlib.contextmanager
def postgres_advisory_lock(uri: str) -> Iterator[None]:
    """Hold :data:`ADVISORY_LOCK_KEY` on the database at ``uri`` for the block (a session
    lock: released when the block ends or the connection dies with its process)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(
        uri, poolclass=sqlalchemy.pool.NullPool,
        connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S,
                      "options": f"-c statement_timeout={POSTGRES_LOCK_TIMEOUT_S * 1000}"})
    try:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"),
                               {"key": ADVISORY_LOCK_KEY})
            try:
                yield
            finally:
                connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"),
                                   {"key": ADVISORY_LOCK_KEY})
    finally:
        engine.dispose()


#: Opening a SQLite store reads its tables with the driver's 5 s busy timeout; a writer
#: ending runs at that moment (an orphaned trial after its driver died) can hold it longer.
OPEN_ATTEMPTS = 5


def _open_store(uri: str) -> None:
    import mlflow
    from sqlalchemy.exc import OperationalError

    for attempt in range(1, OPEN_ATTEMPTS + 1):
        try:
            mlflow.MlflowClient(uri)
            return
        except OperationalError as e:
            if "database is locked" not in str(e) or attempt == OPEN_ATTEMPTS:
                raise
