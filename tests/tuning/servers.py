"""A real `mlflow server` on loopback for the shared-study tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from mlflow.environment_variables import MLFLOW_SERVER_ENABLE_JOB_EXECUTION


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    """A real `mlflow server` on loopback that a test can stop and start again (same port,
    same store)."""

    def __init__(self, backend: str, artifacts: Path, *args: str,
                 env: dict[str, str] | None = None, host: str = "127.0.0.1") -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [shutil.which("mlflow"), "server", "--backend-store-uri", backend,
                        "--host", host, "--port", str(self.port),
                        "--artifacts-destination", str(artifacts), "--workers", "1", *args]
        # MLflow 3's server also starts a job runner and seven huey consumers for its GenAI
        # jobs, which no test uses: about 10 s of CPU to start, more while idle
        # (docs/studies.md, "Many machines")
        self.env = {**os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION.name: "false", **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it and wait until it answers (at most 2 minutes)."""
        self.proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=self.env,
                                     start_new_session=True)
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/health", timeout=2)
                return
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("mlflow server did not start") from None
                time.sleep(0.5)

    def kill(self) -> None:
        """Kill it and its workers at once (SIGKILL to its process group)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


@contextlib.contextmanager
def mlflow_server(backend: str, artifacts: Path, *args: str,
                  env: dict[str, str] | None = None) -> Iterator[str]:
    """Start `mlflow server` on a free loopback port; yield its URL; stop it."""
    server = MlflowServer(backend, artifacts, *args, env=env)
    try:
        server.start()
        yield server.url
    finally:
        server.stop()
