"""A real `mlflow server` on loopback for the shared-study tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def mlflow_server(backend: str, artifacts: Path, *args: str,
                  env: dict[str, str] | None = None) -> Iterator[str]:
    """Start `mlflow server` on a free loopback port; yield its URL; stop it."""
    port = _free_port()
    proc = subprocess.Popen(
        [shutil.which("mlflow"), "server", "--backend-store-uri", backend, "--host", "127.0.0.1",
         "--port", str(port), "--artifacts-destination", str(artifacts), "--workers", "1",
         *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2)
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("mlflow server did not start") from None
                time.sleep(1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
