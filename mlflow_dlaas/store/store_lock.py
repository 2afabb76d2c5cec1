"""A new tracking store initialised once, under a lock, before concurrent users touch it.

Several processes opening a fresh database at once (study workers, monitors, trial
processes) each see no tables, each run the migrations, and all but one fail ("table
already exists" on SQLite, ``UniqueViolation ... alembic_version`` on PostgreSQL). Each of
our processes first takes an exclusive lock and opens the store while holding it: the
first one creates the tables, the others wait for it and find them. A SQLite file is locked
with ``fcntl.flock`` on ``<file>.lock`` beside it, a PostgreSQL database with a
session-level advisory lock; a tracking server serialises its own store.

A new SQLite store is made in a scratch file beside it and moved into place in one rename,
so a stop at any moment of its creation leaves no half-made store. One left half-made by
another program (``mlflow run`` opens the store itself, before our entry point, and a stop
during its migrations leaves tables without their version) is set aside and made anew when
it holds no run; one that holds runs is an error said in one line.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mlflow_dlaas.console_log import console

log = console(__name__)

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
#: sqlite3 waits 5 s, which a busy 2-core machine exceeds with a study's driver, its trial's
#: entry and monitor writing one store.
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
            _open_sqlite_store(uri, path)
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


#: what SQLite says when a migration meets a table or a column an earlier, stopped one made
#: (SQLite commits each ALTER TABLE: a migration stopped between two leaves the first done)
_HALF_MADE = ("already exists", "duplicate column name")


def _open_sqlite_store(uri: str, path: Path) -> None:
    """Create the store atomically where it is new; repair it where another program's
    stopped creation left it half-made and empty; else open it."""
    for scratch in path.parent.glob(f"{path.name}.creating-*"):  # a stopped creation's
        scratch.unlink(missing_ok=True)
    if not path.exists() or path.stat().st_size == 0:
        _create_sqlite_store(path)
    try:
        _open_store(uri)
    except Exception as e:  # SQLAlchemy's OperationalError, wrapped by MLflow or not
        if not any(sign in str(e) for sign in _HALF_MADE):
            raise
        _forget_engine(uri)
        _repair_half_made(path, e)
        _open_store(uri)


def _forget_engine(uri: str) -> None:
    """Drop the engine MLflow keeps for ``uri`` (one per database URI, in
    ``SqlAlchemyStore._engine_map``): its pooled connections still hold the half-made file."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    engine = SqlAlchemyStore._engine_map.pop(uri, None)
    if engine is not None:
        engine.dispose()


def _create_sqlite_store(path: Path) -> None:
    """MLflow's tables in ``<path>.creating-<pid>``, then one rename to ``path``."""
    from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f"{path.name}.creating-{os.getpid()}")
    store = SqlAlchemyStore(f"sqlite:///{scratch}", DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH)
    store.engine.dispose()
    os.replace(scratch, path)


def _repair_half_made(path: Path, error: Exception) -> None:
    """Set an empty half-made store aside (``<path>.half-made-<time>``) and make it anew;
    one that holds runs is left as it is, with a one-line error saying what to do."""
    from mlflow_dlaas.errors import TrackingUnavailableError

    if _run_count(path):
        raise TrackingUnavailableError(
            f"the tracking store {path} is half-migrated ({str(error).splitlines()[0][:200]})"
            " and holds runs: back it up, then run `mlflow db upgrade sqlite:///"
            f"{path}`") from None
    aside = path.with_name(f"{path.name}.half-made-{time.strftime('%Y%m%d-%H%M%S')}")
    os.replace(path, aside)
    log.info(f"mlflow-dlaas: the tracking store {path} was left half-made by a stopped first "
             f"use and held no run: set aside as {aside.name}, made anew")
    _create_sqlite_store(path)


def _run_count(path: Path) -> int:
    """Runs in a SQLite store (0 where it has no runs table yet)."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        try:
            return int(connection.execute("SELECT count(*) FROM runs").fetchone()[0])
        except sqlite3.OperationalError:
            return 0
