"""A new SQLite store used by several processes at once: initialised once, nobody crashes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mlflow_dlaas.store.store_lock import sqlite_path
from mlflow_dlaas.store.store_uri import TRACKING_ENV


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

    from mlflow_dlaas.store.store_lock import initialise_tracking_store

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


def _half_made(path: Path, runs: int = 0) -> None:
    """A store whose later migrations ran but whose version stayed behind (here: before the
    one that adds ``webhooks``): what a stop during another program's first use (``mlflow
    run`` opening ``./mlflow.db``) leaves; reopening fails "table webhooks already
    exists"."""
    import sqlite3

    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{path}")
    for _ in range(runs):
        client.create_run("0")
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE alembic_version SET version_num = 'de4033877273'")
        connection.execute("DROP TABLE review_queue_users")  # made by a later migration


def _monitor_true(cli_path: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """``mlflow-dlaas monitor -- true`` in ``folder``: a command that opens ./mlflow.db."""
    env = {k: v for k, v in os.environ.items()
           if k not in (TRACKING_ENV, "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID",
                        "MLFLOW_EXPERIMENT_NAME")}
    return subprocess.run([cli_path, "monitor", "--", "true"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def test_an_empty_half_made_store_is_set_aside_and_made_anew(cli_path: str,
                                                             tmp_path: Path) -> None:
    _half_made(tmp_path / "mlflow.db")
    done = _monitor_true(cli_path, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "left half-made by a stopped first use and held no run: set aside" in done.stderr
    assert len(list(tmp_path.glob("mlflow.db.half-made-*"))) == 1
    assert _monitor_true(cli_path, tmp_path).returncode == 0  # and stays usable


def test_a_half_made_store_with_runs_is_left_alone_with_one_line(cli_path: str,
                                                                 tmp_path: Path) -> None:
    _half_made(tmp_path / "mlflow.db", runs=1)
    done = _monitor_true(cli_path, tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "error" in x]
    assert "half-migrated" in line and "holds runs: back it up" in line
    assert not list(tmp_path.glob("*.half-made-*"))


@pytest.mark.parametrize("stop_after_s", [0.5, 1.5, 3.0])
@pytest.mark.parametrize("creator", ["mlflow", "ours"])
def test_a_first_use_stopped_at_any_moment_never_wedges_the_store(
        cli_path: str, tmp_path: Path, stop_after_s: float, creator: str) -> None:
    """MLflow's own first use (as ``mlflow run`` makes it) or ours, stopped by SIGTERM at
    several offsets; then our next command opens the store and works."""
    import signal
    import sys
    import time

    store = tmp_path / "mlflow.db"
    code = {"mlflow": f"import mlflow; mlflow.MlflowClient('sqlite:///{store}')"
                      ".search_experiments()",
            "ours": "from mlflow_dlaas.store.store_lock import initialise_tracking_store; "
                    f"initialise_tracking_store('sqlite:///{store}')"}[creator]
    first = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(stop_after_s)
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=60)
    done = _monitor_true(cli_path, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob("mlflow.db.creating-*"))


def test_a_first_use_stopped_between_a_new_column_and_its_version_is_made_anew(
        cli_path: str, tmp_path: Path) -> None:
    """SQLite commits each ALTER TABLE: a migration stopped after it adds a column and
    before it records its version leaves "duplicate column name" for the next one (seen
    when MLflow's own first use was stopped at 3 s)."""
    import sqlite3

    from mlflow_dlaas.store.store_lock import initialise_tracking_store

    store = tmp_path / "mlflow.db"
    initialise_tracking_store(f"sqlite:///{store}")
    with sqlite3.connect(store) as connection:  # the version before the column was added,
        connection.execute("UPDATE alembic_version SET version_num = '2d6e25af4d3e'")
        connection.execute("DROP TABLE review_queue_users")  # and a later table not yet made
    done = _monitor_true(cli_path, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "set aside" in done.stderr and list(tmp_path.glob("mlflow.db.half-made-*"))
