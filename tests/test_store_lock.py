"""A new SQLite store used by several processes at once: initialised once, nobody crashes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mlflow_dlaas.store_lock import sqlite_path
from mlflow_dlaas.tracking import TRACKING_ENV


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
