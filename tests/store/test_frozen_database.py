"""A PostgreSQL server frozen (SIGSTOP on every one of its processes) under our commands:
during ``monitor``, during a study's trial and at a run's end. Each command ends within
60 s of the freeze, says so in one line, keeps what it could not write in its journal,
and ``resend`` delivers it once the server is thawed. Each test waits out the real bound
(40 s without a reply): the wait is its point."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import mlflow
import pytest

from mlflow_dlaas.store.journal import JOURNAL_ENV, journals_in
from tests.conftest import user_env
from tests.postgres import OwnPostgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
#: The done-when: a frozen server costs a command at most this much.
WITHIN_S = 60


def _env(tmp_path: Path, tracking: str) -> dict[str, str]:
    return {**user_env(tmp_path), "MLFLOW_TRACKING_URI": tracking,
            JOURNAL_ENV: str(tmp_path / "journal")}


def _runs(tracking: str, experiment: str) -> list[mlflow.entities.Run]:
    client = mlflow.MlflowClient(tracking)
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id]) if found else []


def _wait_for(condition, what: str, within_s: float = 300) -> None:  # noqa: ANN001
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {within_s} s"
        time.sleep(0.3)


def _frozen_until_it_ends(server: OwnPostgres, proc: subprocess.Popen[str]) -> str:
    """Freeze ``server`` until ``proc`` ends, which must be within :data:`WITHIN_S`; its
    stderr."""
    server.freeze()
    frozen_at = time.monotonic()
    try:
        _, stderr = proc.communicate(timeout=180)
        took = time.monotonic() - frozen_at
    finally:
        server.thaw()
    assert took < WITHIN_S, (took, stderr[-3000:])
    return stderr


def _said_once(stderr: str) -> None:
    """No traceback; the outage said once, and how to send what was kept."""
    assert "Traceback" not in stderr, stderr[-3000:]
    assert stderr.count("does not answer") <= 1, stderr[-3000:]
    assert "mlflow-dlaas resend" in stderr, stderr[-3000:]


def test_monitor_on_a_frozen_database_ends_in_the_bound_and_keeps_its_run(
        own_postgres: OwnPostgres, tmp_path: Path, cli_path: str) -> None:
    tracking = own_postgres.database(f"monitor_{uuid.uuid4().hex[:8]}")
    proc = subprocess.Popen([cli_path, "monitor", "--experiment", "frozen", "--", "sh", "-c",
                             "sleep 8; exit 3"], env=_env(tmp_path, tracking), cwd=tmp_path,
                            stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: _runs(tracking, "frozen"), "the monitor's run")
    stderr = _frozen_until_it_ends(own_postgres, proc)
    assert proc.returncode == 3, stderr[-3000:]  # the command's, whatever the store did
    _said_once(stderr)
    assert journals_in([tmp_path / "journal"]), "nothing kept"
    sent = subprocess.run([cli_path, "resend"], env=_env(tmp_path, tracking), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    (run,) = _runs(tracking, "frozen")
    assert run.info.status == "FAILED" and run.data.metrics["exit_code"] == 3.0
    assert any(k.startswith("system/") for k in run.data.metrics)
    assert not journals_in([tmp_path / "journal"])


def test_a_run_whose_database_freezes_at_its_end_keeps_its_last_writes(
        own_postgres: OwnPostgres, tmp_path: Path, cli_path: str) -> None:
    """Frozen once training is over (both epochs' test accuracy logged): the run's last
    metrics, its summary and its end wait in its journal; the entry exits within the
    bound with its code for undelivered writes."""
    from mlflow_dlaas.errors import EXIT_UNDELIVERED

    tracking = own_postgres.database(f"end_{uuid.uuid4().hex[:8]}")
    env = {**_env(tmp_path, tracking), "MLFLOW_EXPERIMENT_NAME": "frozen"}
    proc = subprocess.Popen([sys.executable, "-m", "mlflow_dlaas.workloads.train",
                             "--framework", "pytorch", "--model", "lenet5", "--dataset",
                             "mnist5k", "--epochs", "2"], env=env, cwd=tmp_path,
                            stderr=subprocess.PIPE, text=True)
    client = mlflow.MlflowClient(tracking)

    def trained() -> bool:
        runs = _runs(tracking, "frozen")
        return bool(runs) and len(client.get_metric_history(
            runs[0].info.run_id, "test_accuracy")) == 2 or proc.poll() is not None
    _wait_for(trained, "the end of training")
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    stderr = _frozen_until_it_ends(own_postgres, proc)
    assert proc.returncode == EXIT_UNDELIVERED, stderr[-3000:]
    _said_once(stderr)
    sent = subprocess.run([cli_path, "resend"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    (run,) = _runs(tracking, "frozen")
    assert run.info.status == "FINISHED", run.data.tags
    assert "Headline/test_accuracy" in run.data.metrics, sorted(run.data.metrics)


def test_a_study_whose_database_freezes_mid_trial_ends_in_one_line(
        own_postgres: OwnPostgres, tmp_path: Path, cli_path: str) -> None:
    """The tracking store and the study's storage on one server, frozen during a trial: the
    driver ends within the bound, exit 1, one line; nothing of the study is left running;
    once thawed, ``resend`` and the next command leave no run RUNNING."""
    import psutil
    import yaml

    tracking = own_postgres.database(f"study_{uuid.uuid4().hex[:8]}")
    storage = own_postgres.database(f"optuna_{uuid.uuid4().hex[:8]}")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({
        "name": "frozen", "frameworks": ["pytorch"], "sampler": "grid", "n_trials": 2,
        "fixed": {"epochs": 2, "warmup_steps": 1},
        "search_space": {"batch_size": [32, 64]},
        "objectives": [{"metric": "train_time", "direction": "minimize"}]}))
    env = _env(tmp_path, tracking)
    study = subprocess.Popen([cli_path, "study", "spec.yaml", "--storage", storage],
                             cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    _wait_for(lambda: any(r.data.tags.get("dlaas.role") == "trial"
                          for r in _runs(tracking, "frozen")) or study.poll() is not None,
              "a trial's start")
    time.sleep(2)  # the trial's process under way
    assert study.poll() is None, study.communicate()[1][-3000:]
    tree = [study.pid, *(c.pid for c in psutil.Process(study.pid).children(recursive=True))]
    own_postgres.freeze()
    frozen_at = time.monotonic()
    try:
        _, stderr = study.communicate(timeout=180)
        took = time.monotonic() - frozen_at
        time.sleep(1)
        left = [p for p in tree if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    finally:
        own_postgres.thaw()
    assert took < WITHIN_S, (took, stderr[-3000:])
    assert study.returncode == 1, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("mlflow-dlaas: error:")]  # the driver's
    assert errors == lines[-1:] and "the database server stopped answering" in errors[0], \
        stderr[-3000:]
    assert not left, "left running"
    subprocess.run([cli_path, "resend"], env=env, cwd=tmp_path, capture_output=True,
                   timeout=120, check=True)
    after = subprocess.run([cli_path, "compare", "--experiment", "frozen", "--no-run",
                            "--output", str(tmp_path / "report")], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
    assert "Traceback" not in after.stderr, after.stderr[-3000:]
    statuses = [r.info.status for r in _runs(tracking, "frozen")]
    assert statuses and "RUNNING" not in statuses, statuses
