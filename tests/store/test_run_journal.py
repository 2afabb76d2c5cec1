"""Results that outlive the tracking server: a run whose server dies keeps measuring, holds
what it logs in its journal, and either delivers it when the server is back or says, in one
line, the command that sends it later (``mlflow-dlaas resend``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import mlflow
import pytest
import requests

from mlflow_dlaas.errors import EXIT_UNDELIVERED
from mlflow_dlaas.store.journal import JOURNAL_ENV, RunJournal
from mlflow_dlaas.store.resend import resend_journals
from mlflow_dlaas.store.store_uri import is_unreachable
from tests.tuning.servers import MlflowServer

TRAIN = ["--framework", "pytorch", "--model", "lenet5", "--dataset", "mnist5k", "--epochs", "2"]


def test_a_journal_keeps_order_and_what_was_sent(tmp_path: Path) -> None:
    journal = RunJournal.open("a" * 32, "http://alice:secret@host:5000", root=tmp_path)
    first = journal.append("rest", api="SetTag", body="{}")
    second = journal.append("rest", api="LogBatch", body="{}")
    journal.mark_sent(first.seq)
    with open(journal.folder / "journal.jsonl", "a") as out:
        out.write('{"seq": 3, "kind": "re')  # a kill in the middle of a line
    assert [op.seq for op in RunJournal(journal.folder).pending()] == [second.seq]
    assert "secret" not in (journal.folder / "about.json").read_text()
    assert not journal.remove_if_delivered()
    journal.mark_sent(second.seq)
    assert journal.remove_if_delivered() and not journal.folder.parent.exists()


def test_resend_leaves_the_journal_of_a_process_still_logging_its_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = RunJournal.open("b" * 32, "http://127.0.0.1:9", root=tmp_path)  # ours: alive
    journal.append("rest", api="SetTag", body='{"run_id": "' + "b" * 32 + '"}')
    resend_journals([tmp_path])
    assert "is still being logged by its process" in capsys.readouterr().err
    assert [op.seq for op in journal.pending()] == [1]
    assert oct(journal.folder.stat().st_mode & 0o777) == "0o700"  # its params are private


def test_only_a_server_that_does_not_answer_counts_as_away() -> None:
    try:
        try:
            raise requests.exceptions.ConnectionError("refused")
        except requests.exceptions.ConnectionError:
            raise mlflow.exceptions.MlflowException("API request failed") from None
    except mlflow.exceptions.MlflowException as e:
        assert is_unreachable(e)  # MLflow drops the cause; the context keeps it
    assert not is_unreachable(mlflow.exceptions.MlflowException("INVALID_PARAMETER_VALUE"))


def _train_against(server: MlflowServer, folder: Path, deliver_within_s: float,
                   ) -> tuple[subprocess.Popen[str], str]:
    """Start a training entry logging to ``server``; return it and its run id once the
    monitor has logged its first samples (the run is under way)."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
           "MLFLOW_TRACKING_URI": server.url, "MLFLOW_EXPERIMENT_NAME": "journal",
           JOURNAL_ENV: str(folder / "journal"),
           "MLFLOW_DLAAS_DELIVER_WITHIN_S": str(deliver_within_s)}
    proc = subprocess.Popen([sys.executable, "-m", "mlflow_dlaas.workloads.train", *TRAIN],
                            env=env, cwd=folder, stderr=subprocess.PIPE, text=True)
    client = mlflow.MlflowClient(server.url)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
        if runs and any(k.startswith("system/") for k in runs[0].data.metrics):
            return proc, runs[0].info.run_id
        time.sleep(0.3)
    proc.kill()
    pytest.fail(f"the run never logged its first samples: {proc.communicate()[1][-3000:]}")


def _assert_whole(server: MlflowServer, run_id: str) -> None:
    client = mlflow.MlflowClient(server.url)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED", run.data.tags.get("dlaas.failure_reason")
    for key in ("Headline/test_accuracy", "Headline/train_time_seconds",
                "Headline/peak_memory_megabytes",
                "train/duration_seconds"):
        assert key in run.data.metrics, sorted(run.data.metrics)
    logged = {f.path for f in client.list_artifacts(run_id)}
    assert {"model", "monitor", "summary.json", "worker"} <= logged, logged


@pytest.mark.slow
def test_a_run_whose_server_dies_keeps_its_results_until_they_are_resent(
        tmp_path: Path, cli_path: str) -> None:
    server = MlflowServer(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "artifacts")
    server.start()
    try:
        proc, run_id = _train_against(server, tmp_path, deliver_within_s=3)
        server.kill()
        _, stderr = proc.communicate(timeout=600)
        assert proc.returncode == EXIT_UNDELIVERED, stderr[-3000:]
        assert "Traceback" not in stderr and "Retrying" not in stderr, stderr[-3000:]
        assert stderr.count("does not answer") == 1, stderr[-3000:]
        folder = tmp_path / "journal" / run_id / str(proc.pid)
        assert f"mlflow-dlaas resend {folder}" in stderr.splitlines()[-1], stderr[-3000:]

        server.start()
        env = {**os.environ, JOURNAL_ENV: str(tmp_path / "journal")}
        env.pop("MLFLOW_TRACKING_URI", None)  # the journal knows its server
        sent = subprocess.run([cli_path, "resend"], env=env, capture_output=True, text=True,
                              timeout=300)
        assert sent.returncode == 0, sent.stderr
        assert re.search(rf"sent \d+ writes of run {run_id}", sent.stderr), sent.stderr
        assert not folder.parent.exists()
        _assert_whole(server, run_id)

        again = subprocess.run([cli_path, "resend"], env=env, capture_output=True, text=True,
                               timeout=300)
        assert again.returncode == 0 and "nothing to send" in again.stderr, again.stderr
        printed = subprocess.run([cli_path, "resend", str(folder)], env=env,
                                 capture_output=True, text=True, timeout=300)
        assert printed.returncode == 0, printed.stderr  # the line it printed, run twice
        assert "does not exist: nothing to send there" in printed.stderr, printed.stderr
    finally:
        server.stop()


@pytest.mark.slow
def test_held_results_go_out_when_the_server_comes_back_during_the_run(
        tmp_path: Path) -> None:
    server = MlflowServer(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "artifacts")
    server.start()
    try:
        proc, run_id = _train_against(server, tmp_path, deliver_within_s=300)
        server.kill()
        time.sleep(2)
        server.start()
        _, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-3000:]
        assert "answers again" in stderr or "does not answer" not in stderr, stderr[-3000:]
        assert not (tmp_path / "journal" / run_id).exists()
        _assert_whole(server, run_id)
        summary = json.loads(Path(mlflow.MlflowClient(server.url).download_artifacts(
            run_id, "summary.json", str(tmp_path))).read_text())
        assert summary["monitor"], "the monitor's summary was lost"
    finally:
        server.stop()


@pytest.mark.slow
def test_monitor_keeps_its_run_when_the_server_goes_away_and_exits_with_the_commands_code(
        tmp_path: Path, cli_path: str) -> None:
    """`monitor` made its run itself, so MLflow had no copy to read back offline: it exited
    1, never ended the run and lost its timeline, summary, read-back and exit code."""
    server = MlflowServer(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "artifacts")
    server.start()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
           "MLFLOW_TRACKING_URI": server.url, JOURNAL_ENV: str(tmp_path / "journal"),
           "MLFLOW_DLAAS_DELIVER_WITHIN_S": "2"}
    try:
        proc = subprocess.Popen([cli_path, "monitor", "--experiment", "away", "--", "sh", "-c",
                                 "sleep 6; exit 3"], env=env, cwd=tmp_path,
                                stderr=subprocess.PIPE, text=True)
        client = mlflow.MlflowClient(server.url)
        deadline = time.monotonic() + 120
        while not _runs_of(client, "away") and time.monotonic() < deadline:
            time.sleep(0.3)
        server.kill()
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 3, stderr[-3000:]  # the command's, whatever the server did
        assert "Traceback" not in stderr, stderr[-3000:]
        assert "mlflow-dlaas resend" in stderr, stderr[-3000:]

        server.start()
        sent = subprocess.run([cli_path, "resend"], env={**env, "MLFLOW_TRACKING_URI": ""},
                              capture_output=True, text=True, timeout=300)
        assert sent.returncode == 0, sent.stderr
        (run,) = _runs_of(client, "away")
        assert run.info.status == "FAILED"  # ended, with its reason: exit code 3
        assert run.data.metrics["exit_code"] == 3.0
        assert "exited with code 3" in run.data.tags["dlaas.failure_reason"]
        logged = {f.path for f in client.list_artifacts(run.info.run_id)}
        assert {"monitor", "summary.json", "libraries"} <= logged, logged
    finally:
        server.stop()


def _runs_of(client: mlflow.MlflowClient, experiment: str) -> list[mlflow.entities.Run]:
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id]) if found else []


@pytest.mark.parametrize(("damage", "said"), [
    (lambda j: _write_line(j, "42"), "line 2 of"),
    (lambda j: _write_line(j, "{}"), "not an operation (no whole-number seq)"),
    (lambda j: (j.folder / "about.json").write_text("{not json"), "about.json cannot be read"),
    (lambda j: (j.folder / "about.json").write_bytes(b"\xff\xfe\x00"), "about.json cannot be"),
])
def test_a_damaged_journal_is_one_line_and_the_others_still_go(
        tmp_path: Path, cli_path: str, damage: Callable[[RunJournal], object], said: str
) -> None:
    """A line `42` or `{}`, or a corrupt about.json, crashed resend with a traceback and
    held every other journal back."""
    damaged = _left_journal("a" * 32, "http://127.0.0.1:9", tmp_path / "journal")
    damaged.append("rest", api="SetTag", body='{"run_id": "' + "a" * 32 + '"}')
    damage(damaged)
    _write_line(damaged, json.dumps({"seq": 3, "kind": "rest", "api": "SetTag", "body": "{}"}))
    env = {**os.environ, JOURNAL_ENV: str(tmp_path / "journal")}
    env.pop("MLFLOW_TRACKING_URI", None)
    out = subprocess.run([cli_path, "resend"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert f"journal {damaged.folder} is damaged" in out.stderr and said in out.stderr, \
        out.stderr
    assert "1 damaged journal(s) not sent" in out.stderr.splitlines()[-1]
    assert (damaged.folder / "journal.jsonl").exists()  # kept for the user to repair


def _left_journal(run_id: str, uri: str, root: Path) -> RunJournal:
    """A journal as a process that has ended leaves it (no live owner: resend sends it)."""
    journal = RunJournal.open(run_id, uri, root=root)
    about = json.loads((journal.folder / "about.json").read_text())
    (journal.folder / "about.json").write_text(json.dumps({**about, "owner": {}}))
    return journal


def _write_line(journal: RunJournal, line: str) -> None:
    with open(journal.folder / "journal.jsonl", "a") as out:
        out.write(line + "\n")


def test_an_unreadable_sent_file_sends_again_rather_than_losing(tmp_path: Path) -> None:
    journal = RunJournal.open("b" * 32, "http://127.0.0.1:9", root=tmp_path)
    for _ in range(3):
        journal.append("rest", api="SetTag", body="{}")
    (journal.folder / "sent").write_bytes(b"1\n\xff\xfe garbage\n")
    assert [op.seq for op in journal.pending()] == [2, 3]


@pytest.mark.slow
def test_a_held_write_that_can_never_be_sent_is_skipped_not_stuck(
        tmp_path: Path, cli_path: str) -> None:
    """A journal line whose metric is NaN (not JSON the server can take) held its journal
    for good: every resend failed on it and sent nothing after it."""
    server = MlflowServer(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "artifacts")
    server.start()
    try:
        client = mlflow.MlflowClient(server.url)
        run_id = client.create_run(client.create_experiment("nan")).info.run_id
        journal = _left_journal(run_id, server.url, tmp_path / "journal")
        journal.append("rest", api="LogMetric", body=json.dumps(
            {"run_id": run_id, "key": "m", "value": float("nan"), "timestamp": 1, "step": 0}))
        journal.append("rest", api="SetTag", body=json.dumps(
            {"run_id": run_id, "key": "after", "value": "sent"}))
        env = {**os.environ, JOURNAL_ENV: str(tmp_path / "journal")}
        env.pop("MLFLOW_TRACKING_URI", None)
        out = subprocess.run([cli_path, "resend"], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert "refused a held write" in out.stderr and "skipped" in out.stderr
        assert client.get_run(run_id).data.tags["after"] == "sent"
        assert not journal.folder.exists()
    finally:
        server.stop()
