"""The pipe between the measured worker and its entry process: one JSON object per line.

The worker side (:class:`WorkerChannel`) imports nothing heavy; the entry side reads the
lines with :func:`decode` in a thread that only marks phase edges on the monitor, so a
boundary lands within a sample's time of the worker's edge.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FD_ENV = "DLAAS_WORKER_FD"
DIR_ENV = "DLAAS_WORKER_DIR"


@dataclass(frozen=True)
class Message:
    """One report: ``kind`` is phase | metrics | params | tags | artifacts | result | error."""

    kind: str
    body: dict[str, Any] = field(default_factory=dict)


def decode(line: str) -> Message:
    """A line written by :meth:`WorkerChannel.send` back into a :class:`Message`."""
    data = json.loads(line)
    return Message(str(data.pop("kind")), data)


class WorkerChannel:
    """What the measured code reports: phases, metrics, params, tags, files, its result."""

    def __init__(self, fd: int | None = None) -> None:
        if fd is None:
            fd = int(os.environ[FD_ENV]) if FD_ENV in os.environ else -1
        self._out = os.fdopen(fd, "w", buffering=1) if fd >= 0 else None

    def send(self, kind: str, **body: Any) -> None:
        if self._out is not None:
            self._out.write(json.dumps({"kind": kind, **body}, default=float) + "\n")

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Mark a measured window; the entry samples the worker at both edges."""
        self.send("phase", name=name, edge="start")
        try:
            yield
        finally:
            self.send("phase", name=name, edge="end")

    def metrics(self, values: Mapping[str, float], step: int | None = None) -> None:
        self.send("metrics", values=dict(values), step=step)

    def params(self, values: Mapping[str, Any]) -> None:
        self.send("params", values={k: str(v) for k, v in values.items()})

    def tags(self, values: Mapping[str, str]) -> None:
        self.send("tags", values=dict(values))

    def artifacts(self, local_dir: Path, artifact_path: str) -> None:
        """Files for the entry to log; ``local_dir`` must live in :func:`worker_dir`."""
        self.send("artifacts", path=str(local_dir), artifact_path=artifact_path)

    def result(self, **values: Any) -> None:
        self.send("result", **values)

    def error(self, error: BaseException) -> None:
        self.send("error", type=type(error).__name__, message=str(error))


def worker_dir() -> Path:
    """A fresh folder inside the run-scoped folder the entry removes when the run ends."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="dlaas-", dir=os.environ.get(DIR_ENV)))
