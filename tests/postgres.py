"""The PostgreSQL service the postgres-marked tests use: an admin connection and fresh
databases, dropped after; a test skips with the reason where none answers."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

POSTGRES_URL = os.environ.get("DLAAS_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432")


def admin_connection() -> Any:
    """An autocommit connection to the service's ``postgres`` database, or a skip."""
    psycopg = pytest.importorskip("psycopg", reason="psycopg missing (extra: postgres)")
    try:
        return psycopg.connect(f"{POSTGRES_URL}/postgres", connect_timeout=3, autocommit=True)
    except psycopg.OperationalError as e:
        pytest.skip(f"no PostgreSQL answers at {POSTGRES_URL} ({e}); set DLAAS_TEST_POSTGRES_URL")


@contextlib.contextmanager
def fresh_databases(*roles: str) -> Iterator[tuple[str, ...]]:
    """One new database per role (MLflow's and Optuna's both use alembic_version), their
    URLs yielded, dropped afterwards."""
    conn = admin_connection()
    names = [f"dlaas_{role}_{uuid.uuid4().hex[:8]}" for role in roles]
    with conn.cursor() as cur:
        for name in names:
            cur.execute(f"CREATE DATABASE {name}")
    try:
        yield tuple(f"{POSTGRES_URL}/{name}" for name in names)
    finally:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.close()


class OwnPostgres:
    """A PostgreSQL server of this test's own (its own cluster and port), which the test may
    freeze (SIGSTOP on every one of its processes, as a paused VM or a stopped container
    would) and thaw; a skip where this machine cannot make one (not root, no initdb)."""

    def __init__(self, listen: tuple[str, ...] = ("127.0.0.1",)) -> None:
        """``listen``: the addresses it answers on (clients of 10.0.0.0/8 are trusted too,
        for hosts made as network namespaces)."""
        initdb = shutil.which("initdb") or next(
            iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))), None)
        if initdb is None or os.geteuid() != 0:
            pytest.skip("an own PostgreSQL server needs initdb and root (it runs as the "
                        "postgres user)")
        self.bin = os.path.dirname(os.path.realpath(initdb))
        self.folder = tempfile.mkdtemp(prefix="dlaas-pg-")
        shutil.chown(self.folder, "postgres")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._as_postgres("initdb", "-D", f"{self.folder}/data", "-A", "trust", "-U", "root",
                          "--no-sync", "-E", "UTF8")
        with open(f"{self.folder}/data/pg_hba.conf", "a") as hba:
            hba.write("host all all 10.0.0.0/8 trust\n")
        self._as_postgres("pg_ctl", "-D", f"{self.folder}/data", "-l", f"{self.folder}/log",
                          "-w", "-o", f"-p {self.port} -k {self.folder} "
                          f"-c listen_addresses={','.join(listen)} -c fsync=off", "start")
        self.url = f"postgresql://root@127.0.0.1:{self.port}"

    def _as_postgres(self, tool: str, *args: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", f"{self.bin}/{tool}", *args],
                       check=True, capture_output=True, timeout=120)

    def database(self, name: str) -> str:
        """A new database on this server; its URL."""
        import psycopg

        with psycopg.connect(f"{self.url}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"{self.url}/{name}"

    def _processes(self) -> list[Any]:
        import psutil

        with open(f"{self.folder}/data/postmaster.pid") as pid_file:
            pid = int(pid_file.readline())
        main = psutil.Process(pid)
        return [main, *main.children(recursive=True)]

    def freeze(self) -> None:
        """Stop every process of the server (SIGSTOP): connections stay open, nothing answers."""
        for process in self._processes():
            process.suspend()

    def thaw(self) -> None:
        for process in self._processes():
            process.resume()

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.thaw()
        with contextlib.suppress(Exception):
            self._as_postgres("pg_ctl", "-D", f"{self.folder}/data", "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)
