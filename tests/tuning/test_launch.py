"""A trial process that dies without ending its run: the run is ended FAILED with the reason."""

from __future__ import annotations

import subprocess
import sys

import mlflow
from mlflow.projects.submitted_run import LocalSubmittedRun

from mlflow_dlaas.launch import end_orphaned_run
from mlflow_dlaas.run_lifecycle import REASON_TAG


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
