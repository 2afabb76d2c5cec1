"""Helpers: write a study spec, run `mlflow-dlaas study` as a user would, read it back."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import mlflow
import pytest
import yaml

#: The cheapest real trial: PyTorch, an MLP on scikit-learn's digits, a few steps.
CHEAP_FIXED = {"model": "mlp", "dataset": "digits", "epochs": 1, "max_steps": 5,
               "warmup_steps": 0, "log_model": "false", "monitor_interval": 0.2}


def write_spec(directory: Path, **spec: Any) -> Path:
    base = {"frameworks": ["pytorch"], "fixed": dict(CHEAP_FIXED),
            "objectives": [{"metric": "accuracy", "direction": "maximize"}]}
    base.update(spec)
    path = directory / f"{base['name']}.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


def study_cli(
    cli: str, spec: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 900,
    wait: bool = True,
) -> subprocess.CompletedProcess | subprocess.Popen:
    environ = {k: v for k, v in (env or os.environ).items()
               if k not in ("MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID")}
    cmd = [cli, "study", str(spec), *args]
    if not wait:
        return subprocess.Popen(cmd, env=environ, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=timeout)


def study_runs(name: str) -> tuple[list[mlflow.entities.Run], list[mlflow.entities.Run]]:
    """(parent runs, child runs) of the study's experiment."""
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("dlaas.role") == "study"]
    children = [r for r in runs if r.data.tags.get("dlaas.role") == "trial"]
    return parents, children


@pytest.fixture
def needs_torch() -> None:
    """Skip where PyTorch, which the study tests train with, is not installed."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the study tests train with PyTorch (extra: torch)")


def study_name() -> str:
    """A fresh study name (one experiment per test)."""
    return f"study-{uuid.uuid4().hex[:8]}"
