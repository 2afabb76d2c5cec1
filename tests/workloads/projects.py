"""Helpers to launch the real `mlflow run projects/<framework>` path from tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import run_building_environment

ROOT = Path(__file__).resolve().parents[2]


def mlflow_run(project: str, experiment: str, params: dict[str, object], *,
               entry: str = "train", env_manager: str = "local",
               timeout: int = 900) -> subprocess.CompletedProcess:
    """Run ``mlflow run projects/<project> -e <entry>`` and return the finished process."""
    mlflow_cli = shutil.which("mlflow")
    assert mlflow_cli, "the mlflow CLI must be on PATH (make test puts .venv/bin first)"
    cmd = [mlflow_cli, "run", str(ROOT / "projects" / project), "-e", entry,
           "--experiment-name", experiment, "--env-manager", env_manager]
    for key, value in params.items():
        cmd += ["-P", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID")}
    return run_building_environment(cmd, env_manager, timeout, env=env)
