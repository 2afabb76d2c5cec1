"""Runs that always end: stopped by a signal, or ended KILLED once their owner died."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import weakref
from dataclasses import replace
from pathlib import Path

import mlflow
import pytest

from mlflow_dlaas.measured_process.lifeline import Stopped, check_for_stop, stop_on_signals
from mlflow_dlaas.runs.schema import REASON_TAG
from mlflow_dlaas.store.lifecycle import failing_run_guard
from mlflow_dlaas.store.ownership import Owner, _start_token, owner_tags
from mlflow_dlaas.store.run_ending import end_runs_of_dead_owners


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_raises_stopped_once(signum: int) -> None:
    before = signal.getsignal(signum)
    with pytest.raises(Stopped) as stopped, stop_on_signals():
        os.kill(os.getpid(), signum)
        time.sleep(5)  # interrupted
    assert stopped.value.signum == signum
    assert isinstance(stopped.value, KeyboardInterrupt)
    assert f"stopped by signal {signal.Signals(signum).name}" in str(stopped.value)
    assert signal.getsignal(signum) == before


class _Dropped:
    """Something whose weakref callback is where a stop signal lands."""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_stop_python_dropped_is_raised_at_the_next_safe_point() -> None:
    def stopped_inside_the_callback(_: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)  # the stop lands here: "Exception ignored in" the callback

    with pytest.raises(Stopped) as stopped, stop_on_signals():
        held = _Dropped()
        watcher = weakref.ref(held, stopped_inside_the_callback)
        del held  # the callback runs; Python drops what it raised
        assert watcher() is None  # still here: the stop was dropped
        check_for_stop()
    assert stopped.value.signum == signal.SIGTERM
    check_for_stop()  # no handler installed: nothing to raise


def _write_then_stop(database: Path) -> None:
    """A store write cut by a stop: its connection holds the write lock, its frame holds it."""
    connection = sqlite3.connect(database)
    connection.execute("UPDATE experiments SET name = name")  # the write lock, uncommitted
    raise Stopped(signal.SIGTERM)


def test_a_stop_inside_a_store_write_still_ends_the_run_killed(
        tracking: str, tracking_root: Path) -> None:
    # seen in CI: SIGTERM inside MLflow's log_batch left the database locked, the run RUNNING
    with pytest.raises(Stopped), failing_run_guard() as run:
        _write_then_stop(tracking_root / "mlflow.db")
    ended = mlflow.MlflowClient().get_run(run.info.run_id)
    assert ended.info.status == "KILLED"
    assert ended.data.tags[REASON_TAG] == "Stopped: stopped by signal SIGTERM"


def test_runs_whose_owner_died_are_ended_killed(tracking: str) -> None:
    me = Owner.this_process()
    if not me.start:
        pytest.skip("process start times are read from Linux's /proc")
    client = mlflow.MlflowClient()
    experiment_id = mlflow.get_experiment_by_name(tracking).experiment_id
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = replace(me, pid=process.pid, start=_start_token(process.pid))
    process.kill()
    process.wait()
    owners = {"dead": dead.tags(), "mine": owner_tags(),
              "elsewhere": {**dead.tags(), "dlaas.owner_host": "another-host"}, "none": {}}
    runs = {name: client.create_run(experiment_id, tags=tags).info.run_id
            for name, tags in owners.items()}

    ended = end_runs_of_dead_owners(client)

    assert runs["dead"] in ended
    run = client.get_run(runs["dead"])
    assert run.info.status == "KILLED"
    assert run.data.tags[REASON_TAG] == (
        f"its owner, process {process.pid} on {me.host}, is gone without ending it (it "
        "was killed, or could not reach the store to end it)")
    for name in ("mine", "elsewhere", "none"):
        assert client.get_run(runs[name]).info.status == "RUNNING"
        client.set_terminated(runs[name])


def test_a_run_started_under_the_guard_names_its_owner(tracking: str) -> None:
    with failing_run_guard(run_name="owned") as run:
        pass
    tags = mlflow.MlflowClient().get_run(run.info.run_id).data.tags
    assert Owner.from_tags(tags) == Owner.this_process()


def test_a_monitor_killed_with_sigkill_has_its_run_ended_by_the_next_command(
    cli_path: str, tracking: str
) -> None:
    import psutil

    from tests.conftest import runs_of

    monitor = subprocess.Popen([cli_path, "monitor", "--experiment", tracking, "--",
                                "sleep", "30"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not runs_of(tracking) and time.monotonic() < deadline:
        time.sleep(0.2)
    command = psutil.Process(monitor.pid).children(recursive=True)
    monitor.kill()
    monitor.wait()
    for process in command:  # `sleep` outlives its monitor: not what is tested here
        process.kill()
    (run,) = runs_of(tracking)
    assert run.info.status == "RUNNING"

    later = subprocess.run([cli_path, "monitor", "--experiment", tracking, "--", "true"],
                           capture_output=True, text=True, timeout=120)

    assert later.returncode == 0, later.stderr
    assert "whose owner process died" in later.stderr and run.info.run_id in later.stderr
    ended = mlflow.MlflowClient().get_run(run.info.run_id)
    assert ended.info.status == "KILLED"
    assert f"process {monitor.pid}" in ended.data.tags[REASON_TAG]


def test_an_entry_point_stopped_before_its_workload_ends_its_run_killed(
    tracking: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A study that stops a trial while it starts up (its driver killed, say) must not leave
    the run `mlflow run` made for it RUNNING."""
    from mlflow_dlaas.workloads import entry

    client = mlflow.MlflowClient()
    run = client.create_run(client.get_experiment_by_name(tracking).experiment_id)
    monkeypatch.setenv("MLFLOW_RUN_ID", run.info.run_id)

    def stopped_while_starting(**_: object) -> None:
        raise Stopped(signal.SIGTERM)  # as the signal handler raises it

    monkeypatch.setattr(entry, "configure_tracking", stopped_while_starting)
    monkeypatch.setattr(entry, "die_with_parent", lambda *_: None)  # not on pytest's process
    code = entry.run_entry_point("train", [], lambda _: pytest.fail("no workload starts"), str)
    assert code == 128 + signal.SIGTERM
    ended = client.get_run(run.info.run_id)
    assert ended.info.status == "KILLED"
    assert ended.data.tags[REASON_TAG] == "stopped by signal SIGTERM"
    assert capsys.readouterr().err.strip() == \
        "mlflow-dlaas train: stopped by signal SIGTERM; its run ended KILLED"



@pytest.mark.parametrize("after_s", [0.4, 0.8, 1.2])
def test_an_entry_stopped_mid_import_says_so_in_one_line(tracking: str, after_s: float) -> None:
    """A stop while the entry imported MLflow printed 60 lines of two tracebacks: the
    handler imported MLflow again, half-imported, to look for held writes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow_dlaas.workloads.train", "--framework", "pytorch",
         "--epochs", "1", "--max_steps", "8"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(after_s)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the entry ended before the stop (a fast machine)")
    if proc.returncode == -signal.SIGTERM and not stderr:
        pytest.skip("the stop arrived before the interpreter had started the entry (a busy "
                    "machine): the default action ended it, before any run or handler existed")
    assert "Traceback" not in stderr, stderr[-3000:]
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert len(stderr.strip().splitlines()) <= 3, stderr[-3000:]


def test_a_stop_that_cut_mlflows_import_in_half_still_ends_the_run(tracking: str) -> None:
    """A stop that lands while the entry imports MLflow leaves it half-imported in that
    process (seen on a busy machine: a traceback, and the run left RUNNING): the run is ended
    from a clean one."""
    client = mlflow.MlflowClient()
    run = client.create_run(client.get_experiment_by_name(tracking).experiment_id)
    stopped_mid_import = textwrap.dedent("""
        import sys, types
        sys.modules["mlflow"] = types.ModuleType("mlflow")  # what a cut import leaves
        from mlflow_dlaas.workloads.entry import _end_own_run
        print(_end_own_run("stopped by signal SIGTERM"))
    """)
    done = subprocess.run([sys.executable, "-c", stopped_mid_import],
                          env={**os.environ, "MLFLOW_RUN_ID": run.info.run_id},
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "; its run ended KILLED", done.stderr[-3000:]
    ended = client.get_run(run.info.run_id)
    assert ended.info.status == "KILLED"
    assert ended.data.tags[REASON_TAG] == "stopped by signal SIGTERM"
