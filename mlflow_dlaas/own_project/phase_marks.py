"""``with mlflow_dlaas.phase("train"):``: phase edges from the user's own code, for the
monitor that watches it from outside.

Each edge is one JSON line appended to the file named by :data:`PHASE_FILE_ENV` (set by
``mlflow-dlaas study`` and ``mlflow-dlaas monitor``); where that variable is unset the helper
does nothing, so the user's code runs the same without mlflow-dlaas. Standard library only:
it runs inside the measured process.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator

PHASE_FILE_ENV = "DLAAS_PHASE_FILE"


def _mark(name: str, edge: str) -> None:
    path = os.environ.get(PHASE_FILE_ENV)
    if not path:
        return
    line = json.dumps({"name": name, "edge": edge, "t": time.time()}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())  # one write: a line is never torn by another
    finally:
        os.close(fd)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Mark the code inside as phase ``name`` (``train``, ``evaluate`` ...): its peak memory,
    CPU time and energy are reported apart, and the validity verdict judges it."""
    if not name or "/" in name:
        raise ValueError(f"phase name must be non-empty and without '/', got {name!r}")
    _mark(name, "start")
    try:
        yield
    finally:
        _mark(name, "end")
