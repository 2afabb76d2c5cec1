"""A new file-based store initialised once, under a file lock, before concurrent users touch it.

Several processes opening a fresh SQLite database at once (study workers, monitors, trial
processes) each see no tables, each run the migrations, and all but one fail with "table
already exists". Each of our processes first takes an exclusive ``fcntl.flock`` on
``<file>.lock`` beside the database and opens the store while holding it: the first one
creates the tables, the others wait for it and find them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

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


def initialise_tracking_store(uri: str) -> None:
    """Open MLflow's store at ``uri`` under the lock when it is a SQLite file (the first
    opener creates the tables; MLflow caches the opened store for the process)."""
    path = sqlite_path(uri)
    if path is None:
        return
    with first_use_lock(path):
        _open_store(uri)


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
