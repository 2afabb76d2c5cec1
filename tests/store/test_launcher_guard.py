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
from mlflow_dlaas.runs.schema import REASON_TAG
from mlflow_dlaas.store.launcher_guard import is_mlflow_run_cli, runs_our_project
from mlflow_dlaas.store.ownership import Owner

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


def test_only_our_projects_are_guarded(tmp_path: Path) -> None:
    mlflow_cli = "/venv/bin/mlflow"
    assert runs_our_project([mlflow_cli, "run", str(projects_dir() / "pytorch"), "-e", "train"])
    assert runs_our_project([mlflow_cli, "run", "--env-manager", "local",
                             str(projects_dir().parent)])  # the checkout's own job
    foreign = _foreign_project(tmp_path)
    assert not runs_our_project([mlflow_cli, "run", str(foreign)])
    assert not runs_our_project([mlflow_cli, "run", "https://github.com/mlflow/mlflow-example"])
    assert not runs_our_project(["python", "-c", str(projects_dir() / "pytorch")])


#: a plain MLflow Project of someone else's: it prints that it started, then waits
FOREIGN_MLPROJECT = """name: someone-elses
entry_points:
  main:
    command: "python -c 'import time; print(\\"started\\", flush=True); time.sleep(300)'"
"""
#: ``mlflow`` as it runs where mlflow-dlaas is not installed: our entry point hidden
WITHOUT_US = """import sys
import mlflow.utils.plugins as plugins
found = plugins._get_entry_points
plugins._get_entry_points = lambda group: [
    e for e in found(group) if not e.value.startswith("mlflow_dlaas")]
from mlflow.cli import cli
sys.exit(cli())
"""


def _foreign_project(tmp_path: Path) -> Path:
    project = tmp_path / "foreign"
    project.mkdir(exist_ok=True)
    (project / "MLproject").write_text(FOREIGN_MLPROJECT)
    return project


def _stopped_foreign_run(tracking: str, project: Path, mlflow_cli: list[str]
                         ) -> tuple[int, str, str]:
    """Run ``project`` with ``mlflow_cli run``, SIGTERM it once its entry has started:
    MLflow's exit code, the run's status, and the stderr."""
    experiment = f"foreign-{uuid.uuid4().hex[:6]}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_DLAAS", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["MLFLOW_TRACKING_URI"] = mlflow.get_tracking_uri()
    proc = subprocess.Popen([*mlflow_cli, "run", str(project), "--env-manager", "local",
                             "--experiment-name", experiment], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    entry: list[psutil.Process] = []
    try:
        assert proc.stdout.readline().strip() == "started"
        entry = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        proc.kill()
        for orphan in entry:  # MLflow leaves its entry running (holding our pipes): ours
            with contextlib.suppress(psutil.Error):
                orphan.kill()
    _, stderr = proc.communicate(timeout=60)
    (run,) = _runs(experiment)
    return proc.returncode, run.info.status, stderr


def test_someone_elses_project_runs_under_mlflow_run_exactly_as_without_us(
        tracking: str, tmp_path: Path) -> None:
    """A plain MLflow Project, stopped by SIGTERM under ``mlflow run`` where mlflow-dlaas is
    installed, ends as MLflow alone ends it (killed by the signal, its run left as MLflow
    leaves it), and nothing of ours is said."""
    project = _foreign_project(tmp_path)
    with_us = _stopped_foreign_run(tracking, project, ["mlflow"])
    without_us = _stopped_foreign_run(tracking, project, [sys.executable, "-c", WITHOUT_US])
    assert with_us[:2] == without_us[:2] == (-signal.SIGTERM, "RUNNING")
    assert "mlflow-dlaas" not in with_us[2]


def test_a_run_whose_launcher_died_holding_the_stores_lock_is_ended_once_it_is_gone(
        tmp_path: Path) -> None:
    """A signal can cut one of ``mlflow run``'s own SQLite writes short: the lock stays with
    the dying process until it exits, so the handler's own attempt waited on itself and left
    the run RUNNING under load. The run is now ended from a fresh process once the stopped
    one is gone."""
    from mlflow_dlaas.store.end_after_exit import end_after_exit

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.create_run(client.create_experiment("held"))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "from mlflow_dlaas.store.ownership import Owner\n"
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
