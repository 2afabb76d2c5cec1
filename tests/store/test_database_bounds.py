"""No wait for a database server without a limit: a lock another session holds, and a
server that stops answering mid-use, each end in one line instead of a silent hang."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import mlflow
import pytest

from mlflow_dlaas.store import database_bounds
from mlflow_dlaas.store.database_bounds import LOCK_WITHIN_S, stalled_database_reason
from mlflow_dlaas.store.journal import JOURNAL_ENV
from tests.postgres import fresh_databases

pytestmark = pytest.mark.postgres


@pytest.fixture
def database() -> Iterator[str]:
    with fresh_databases("bounds") as (url,):
        yield url


def test_a_lock_held_by_another_session_ends_the_command_in_one_line(
    cli_path: str, database: str, tmp_path: Path
) -> None:
    """A transaction left open on the tracking database (an admin's LOCK TABLE, a stuck
    client) held every command for as long as it lasted."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PG"))}
    env["MLFLOW_TRACKING_URI"] = database
    experiment = f"bounds-{uuid.uuid4().hex[:6]}"
    command = [cli_path, "monitor", "--experiment", experiment, "--", "true"]
    first = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]

    psycopg = pytest.importorskip("psycopg")

    with psycopg.connect(database) as locker:
        locker.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")  # held until rollback
        started = time.monotonic()
        second = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True,
                                text=True, timeout=300)
        elapsed = time.monotonic() - started
        locker.rollback()
    assert second.returncode == 1, second.stderr[-3000:]
    assert (f"the database server ended a statement that waited for a lock longer than "
            f"{LOCK_WITHIN_S} s") in second.stderr
    assert "Traceback" not in second.stderr
    assert elapsed < 90  # the lock bound, once or a few times, plus start-up; not for ever
    client = mlflow.MlflowClient(database)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert [r.info.status for r in runs] == ["FINISHED"]  # the first; none left RUNNING


class FreezableProxy:
    """A TCP relay to the database server that can stop relaying at once: to the client,
    a server that stopped answering (paused, its host frozen) while its kernel still acks."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.frozen = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def die(self) -> None:
        """What a server that died looks like: every connection reset, new ones refused."""
        self.listener.close()
        for sock in self.open:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._relay, args=(a, b), daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            while self.frozen.is_set():
                time.sleep(0.1)  # swallow nothing, deliver nothing
            try:
                sink.sendall(data)
            except OSError:
                return


def test_a_storage_whose_server_stops_answering_fails_within_the_reply_bound(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paused server held a study's driver until it resumed (240 s in the report): every
    connection now gives up on a reply after the bound, and says so."""
    from mlflow_dlaas.optuna_access.storage import make_storage

    monkeypatch.setattr(database_bounds, "NO_REPLY_WITHIN_S", 3)
    parts = urlsplit(database)
    proxy = FreezableProxy((parts.hostname, parts.port or 5432))
    through = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}"))
    storage, _ = make_storage(through)
    assert storage.get_all_studies() == []
    proxy.frozen.set()
    raised: list[BaseException] = []
    started = time.monotonic()
    reader = threading.Thread(target=_call, args=(storage.get_all_studies, raised), daemon=True)
    reader.start()
    reader.join(timeout=90)  # without a bound it waits for ever: fail, do not hang the suite
    assert not reader.is_alive(), "still waiting for the frozen server after 90 s"
    assert time.monotonic() - started < 30  # 3 s, then a reconnection's 10 s
    assert (stalled_database_reason(raised[0]) or "").startswith(
        "stopped answering (no reply to a statement within 3 s")
    proxy.listener.close()


def _call(function: Callable[[], object], raised: list[BaseException]) -> None:
    try:
        function()
    except Exception as e:
        raised.append(e)


def test_a_database_that_dies_mid_study_ends_the_driver_in_one_line(
    cli_path: str, tmp_path: Path
) -> None:
    """The tracking store and the study storage on one PostgreSQL that dies during a trial:
    the driver crashed with 10 tracebacks and its trial's process outlived it. Now: one
    line, exit 1, nothing of the study left running, and no run RUNNING once what the runs
    kept in their journals is resent and the next command has opened the store again."""
    import psutil
    import yaml

    with fresh_databases("mlflow", "optuna") as (tracking, storage):
        parts = urlsplit(tracking)
        proxy = FreezableProxy((parts.hostname, parts.port or 5432))

        def through(url: str) -> str:
            at = urlsplit(url)
            return urlunsplit(at._replace(netloc=f"{at.username}@127.0.0.1:{proxy.port}"))

        env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PG"))}
        env["MLFLOW_TRACKING_URI"] = through(tracking)
        env[JOURNAL_ENV] = str(tmp_path / "journal")
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump({
            "name": "dies", "frameworks": ["pytorch"], "sampler": "grid", "n_trials": 3,
            "fixed": {"epochs": 1, "max_steps": 40, "warmup_steps": 1},
            "search_space": {"batch_size": [16, 32, 64]},
            "objectives": [{"metric": "train_time", "direction": "minimize"}]}))
        study = subprocess.Popen([cli_path, "study", "spec.yaml", "--storage",
                                  through(storage)], cwd=tmp_path, env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        client = mlflow.MlflowClient(tracking_uri=tracking)  # directly: it stays up
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not _trial_started(client):
            time.sleep(0.5)
        assert study.poll() is None, study.communicate()[1][-3000:]
        tree = [study.pid, *(c.pid for c in psutil.Process(study.pid).children(recursive=True))]
        proxy.die()
        _, stderr = study.communicate(timeout=180)
        assert study.returncode == 1, stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("mlflow-dlaas: error: the database server") and \
            "run the command again" in last, stderr[-3000:]
        time.sleep(2)
        assert not [p for p in tree if psutil.pid_exists(p)
                    and psutil.Process(p).status() != psutil.STATUS_ZOMBIE], "left running"
        back = {**env, "MLFLOW_TRACKING_URI": tracking}  # the database, back (directly)
        subprocess.run([cli_path, "resend"], env=back, cwd=tmp_path, capture_output=True,
                       timeout=120, check=True)  # as its journal line says
        after = subprocess.run([cli_path, "compare", "--experiment", "dies", "--no-run",
                                "--output", str(tmp_path / "report")],
                               env=back, cwd=tmp_path, capture_output=True, text=True,
                               timeout=600)
        assert "Traceback" not in after.stderr, after.stderr[-3000:]
        found = client.get_experiment_by_name("dies")
        statuses = [r.info.status for r in client.search_runs([found.experiment_id])]
        assert statuses and "RUNNING" not in statuses, statuses


def _trial_started(client: mlflow.MlflowClient) -> bool:
    """Whether a trial's run of the study exists (its process is then under way)."""
    found = client.get_experiment_by_name("dies")
    return found is not None and any(
        r.data.tags.get("dlaas.role") == "trial" for r in client.search_runs(
            [found.experiment_id]))
