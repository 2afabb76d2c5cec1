"""Plain `mlflow run` that dies before our entry point takes its run over (a param name
MLflow refuses, a SIGTERM at any moment) leaves no run RUNNING."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import mlflow
import psutil
import pytest

from mlflow_dlaas.project_paths import projects_dir
from mlflow_dlaas.runs.launcher_guard import is_mlflow_run_cli
from mlflow_dlaas.runs.ownership import Owner
from mlflow_dlaas.runs.schema import REASON_TAG

pytestmark = pytest.mark.slow
TRAIN = ["-P", "epochs=1", "-P", "max_steps=8", "-P", "warmup_steps=1"]


def _mlflow_run(tracking: str, experiment: str | None, *params: str
                ) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_RUN_ID",
                                                            "MLFLOW_EXPERIMENT_ID")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # .venv active
    env["MLFLOW_TRACKING_URI"] = mlflow.get_tracking_uri()
    return subprocess.Popen(
        ["mlflow", "run", str(projects_dir() / "pytorch"), "-e", "train", "--env-manager",
         "local", *(["--experiment-name", experiment] if experiment else []), *params],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _runs(experiment: str) -> list[mlflow.entities.Run]:
    client = mlflow.MlflowClient()
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id]) if found else []


def test_a_param_name_mlflow_refuses_ends_the_run_it_made_failed(tracking: str) -> None:
    experiment = f"refused-{uuid.uuid4().hex[:6]}"
    proc = _mlflow_run(tracking, experiment, "-P", "a;b=1", *TRAIN)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode != 0
    (run,) = _runs(experiment)
    assert run.info.status == "FAILED", stderr[-2000:]
    assert "mlflow run failed before the entry point started" in run.data.tags[REASON_TAG]


@pytest.mark.parametrize("after_s", [1.5, 3.0, 4.5, 7.0])
def test_a_sigterm_at_any_moment_leaves_no_run_running(tracking: str, after_s: float) -> None:
    """Before the run exists, between its making and the entry's start, mid-import of the
    entry, and while it trains: the run ends (KILLED) or never was."""
    experiment = f"stopped-{uuid.uuid4().hex[:6]}"
    proc = _mlflow_run(tracking, experiment, *TRAIN)
    time.sleep(after_s)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    deadline = time.monotonic() + 60  # an entry that had started ends its own run
    while any(r.info.status == "RUNNING" for r in _runs(experiment)) and \
            time.monotonic() < deadline:
        time.sleep(0.5)
    statuses = [r.info.status for r in _runs(experiment)]
    assert "RUNNING" not in statuses, statuses


def test_a_sigterm_as_the_entry_starts_stops_the_entry_and_measures_nothing(
        tracking: str) -> None:
    """The race a busy machine shows: ``mlflow run`` dies just after it started the entry
    point, which is still importing and has not taken the run over. The guard ends the run
    KILLED; the entry, orphaned, must stop rather than set the run RUNNING again and train."""
    experiment = f"orphaned-{uuid.uuid4().hex[:6]}"
    proc = _mlflow_run(tracking, experiment, *TRAIN)
    entry = _entry_of(proc.pid, deadline_s=120)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    try:
        entry.wait(timeout=60)
    except psutil.TimeoutExpired:
        entry.kill()
        pytest.fail("the entry point went on after mlflow run was stopped")
    (run,) = _runs(experiment)
    assert run.info.status == "KILLED", run.data.tags.get(REASON_TAG)
    assert not run.data.metrics, "the stopped run measured something"


def test_a_run_that_has_ended_is_never_measured_again(tracking: str) -> None:
    """What the entry meets when its stopped launcher ended the run first (or a user hands
    `mlflow run --run-id` an ended run): it refuses, and the run stays as it was."""
    client = mlflow.MlflowClient()
    run = client.create_run(client.get_experiment_by_name(tracking).experiment_id)
    client.set_terminated(run.info.run_id, "KILLED")
    proc = _mlflow_run(tracking, None, "--run-id", run.info.run_id, *TRAIN)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert f"run {run.info.run_id} has ended KILLED; nothing was measured into it" in stderr
    after = client.get_run(run.info.run_id)
    # MLflow itself then sets it FAILED: its "ended already?" check compares the status's
    # name with numbers (RunStatus.is_terminated("KILLED") is False)
    assert after.info.status in ("KILLED", "FAILED")
    assert not after.data.metrics


def _entry_of(pid: int, deadline_s: float) -> psutil.Process:
    """The entry point ``mlflow run`` (process ``pid``) started, as soon as it appears."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for child in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "mlflow_dlaas.workloads.train" in child.cmdline():
                    return child
        time.sleep(0.01)
    pytest.fail("mlflow run started no entry point")


def test_only_mlflows_run_command_is_guarded() -> None:
    assert is_mlflow_run_cli(["/venv/bin/mlflow", "run", "projects/pytorch"])
    assert is_mlflow_run_cli(["/venv/lib/mlflow/__main__.py", "run", "."])
    assert not is_mlflow_run_cli(["/venv/bin/mlflow", "ui"])
    assert not is_mlflow_run_cli(["/venv/bin/mlflow-dlaas", "run"])
    assert not is_mlflow_run_cli(["python", "-c", "pass"])


def test_a_run_whose_launcher_died_holding_the_stores_lock_is_ended_once_it_is_gone(
        tmp_path: Path) -> None:
    """A signal can cut one of ``mlflow run``'s own SQLite writes short: the lock stays with
    the dying process until it exits, so the handler's own attempt waited on itself and left
    the run RUNNING under load. The run is now ended from a fresh process once the stopped
    one is gone."""
    from mlflow_dlaas.runs.end_after_exit import end_after_exit

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.create_run(client.create_experiment("held"))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "from mlflow_dlaas.runs.ownership import Owner\n"
         "c = sqlite3.connect(sys.argv[1]); c.execute('BEGIN IMMEDIATE')\n"
         "print(Owner.this_process().start, flush=True); time.sleep(600)",
         str(tmp_path / "mlflow.db")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        dying = Owner(socket.gethostname(), holder.pid, holder.stdout.readline().strip())
        assert dying.is_dead() is False  # it holds the lock, alive
        assert end_after_exit(dying, run.info.run_id, "KILLED", "stopped by SIGTERM", uri)
        time.sleep(2)
        assert client.get_run(run.info.run_id).info.status == "RUNNING"  # it waits for the exit
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=30)
    deadline = time.monotonic() + 60
    while client.get_run(run.info.run_id).info.status == "RUNNING" and \
            time.monotonic() < deadline:
        time.sleep(0.5)
    ended = client.get_run(run.info.run_id)
    assert ended.info.status == "KILLED"
    assert ended.data.tags[REASON_TAG] == "stopped by SIGTERM"
