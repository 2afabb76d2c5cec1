"""A new SQLite store used by several processes at once: initialised once, nobody crashes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mlflow_dlaas.runs.store_lock import sqlite_path
from mlflow_dlaas.runs.store_uri import TRACKING_ENV


def test_sqlite_paths() -> None:
    assert sqlite_path("sqlite:////tmp/a/mlflow.db") == Path("/tmp/a/mlflow.db")
    assert sqlite_path("sqlite:///rel.db?timeout=5") == Path("rel.db")
    assert sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path("postgresql://u@h/db") is None


def test_three_first_users_of_a_fresh_store_all_succeed(cli_path: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in (TRACKING_ENV, "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID",
                        "MLFLOW_EXPERIMENT_NAME")}
    monitors = [subprocess.Popen([cli_path, "monitor", "--", "true"], cwd=tmp_path, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for _ in range(3)]
    outputs = [m.communicate(timeout=300)[0] for m in monitors]
    assert [m.returncode for m in monitors] == [0, 0, 0], "\n".join(outputs)[-4000:]
    assert (tmp_path / "mlflow.db").is_file() and (tmp_path / "mlflow.db.lock").is_file()


def test_a_store_held_by_a_writer_longer_than_the_driver_timeout_still_opens(
        tmp_path: Path) -> None:
    import sqlite3
    import threading
    import time

    import mlflow

    from mlflow_dlaas.runs.store_lock import initialise_tracking_store

    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    mlflow.MlflowClient(uri).search_experiments()  # the tables exist
    writer = sqlite3.connect(db, check_same_thread=False)
    writer.execute("BEGIN EXCLUSIVE")  # e.g. an orphaned trial ending its run
    released = threading.Timer(7.0, writer.rollback)
    released.start()
    started = time.monotonic()
    fresh = f"sqlite:///{tmp_path}/./mlflow.db"  # another URI: no store cached for it
    initialise_tracking_store(fresh)
    assert time.monotonic() - started >= 5  # it waited past the driver's own timeout
    released.join()
    writer.close()
