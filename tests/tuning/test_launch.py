"""A trial process that dies without ending its run: the run is ended FAILED with the reason."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import mlflow
import pytest
from mlflow.projects.submitted_run import LocalSubmittedRun

from mlflow_dlaas.launch import PROJECTS_ENV, end_orphaned_run, start_project_run
from mlflow_dlaas.runs.schema import REASON_TAG


def test_a_run_left_running_by_a_dead_process_ends_failed(tracking: str) -> None:
    client = mlflow.MlflowClient()
    experiment_id = client.get_experiment_by_name(tracking).experiment_id
    run_id = client.create_run(experiment_id).info.run_id
    process = subprocess.Popen([sys.executable, "-c", "import os; os._exit(9)"])
    process.wait()
    submitted = LocalSubmittedRun(run_id, process)
    assert end_orphaned_run(client, submitted)
    run = client.get_run(run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags[REASON_TAG] == "the process ended FAILED without ending its run"
    assert not end_orphaned_run(client, submitted)  # an ended run is left as it is


def test_a_started_trial_leaves_nothing_in_the_temp_dir(
    tracking: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    projects = tmp_path / "projects"
    (projects / "pytorch").mkdir(parents=True)
    (projects / "pytorch" / "MLproject").write_text(
        "name: fake\nentry_points:\n  train:\n    command: 'true'\n")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv(PROJECTS_ENV, str(projects))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    client = mlflow.MlflowClient()
    experiment_id = client.get_experiment_by_name(tracking).experiment_id
    submitted = start_project_run("pytorch", "train", {}, experiment_id=experiment_id)
    assert submitted.wait()
    client.set_terminated(submitted.run_id)
    assert list(temp.iterdir()) == []  # MLflow's own folder for 'path' params is gone too
