"""The pipe between the measured worker and its entry process: one JSON object per line.

The worker side (:class:`WorkerChannel`) imports nothing heavy; the entry side reads the
lines with :func:`decode` in a thread that only marks phase edges on the monitor, so a
boundary lands within a sample's time of the worker's edge.

Where the entry decides whether training goes on (a study's pruner), a second pipe carries
its answers back: after each epoch the worker sends a ``checkpoint`` and waits for one line,
``go`` or ``stop`` (:class:`Checkpoints` on the entry side). Without it the worker never waits.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlflow_dlaas.errors import DlaasError

FD_ENV = "DLAAS_WORKER_FD"
DIR_ENV = "DLAAS_WORKER_DIR"
#: The pipe the worker reads the entry's answers at checkpoints from (absent: no waiting).
CONTROL_FD_ENV = "DLAAS_WORKER_CONTROL_FD"


class StopRequested(DlaasError):
    """The entry answered ``stop`` at a checkpoint: the worker stops before the next epoch."""


@dataclass(frozen=True)
class Message:
    """One report: ``kind`` is phase | metrics | params | tags | artifacts | result | error |
    checkpoint (and whatever else the worker sends)."""

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
        control = os.environ.get(CONTROL_FD_ENV)
        self._control = os.fdopen(int(control)) if control else None

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

    def checkpoint(self, step: int) -> None:
        """After epoch ``step`` (its metrics sent): where the entry decides, wait for its
        answer; raise :class:`StopRequested` on ``stop`` (or if the entry is gone)."""
        if self._control is None:
            return
        self.send("checkpoint", step=step)
        answer = self._control.readline().strip()
        if answer != "go":
            raise StopRequested(f"stopped after epoch {step}: the entry process asked "
                                f"({answer or 'it closed the pipe'})")

    def result(self, **values: Any) -> None:
        self.send("result", **values)

    def error(self, error: BaseException) -> None:
        self.send("error", type=type(error).__name__, message=str(error))


def worker_dir() -> Path:
    """A fresh folder inside the run-scoped folder the entry removes when the run ends."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="dlaas-", dir=os.environ.get(DIR_ENV)))


class Checkpoints:
    """The entry's side of the checkpoints: ``decide(step, metrics)`` gets each epoch's
    metrics and returns None to go on or why to stop; the answer goes back at once."""

    def __init__(self, decide: Callable[[int, Mapping[str, float]], str | None]) -> None:
        self.decide = decide
        self.read_fd, write_fd = os.pipe()
        self._answers = os.fdopen(write_fd, "w", buffering=1)
        self._epoch: dict[str, float] = {}
        #: why the worker was told to stop, once it was
        self.stop_reason: str | None = None

    def environment(self) -> dict[str, str]:
        """For the worker's environment (``read_fd`` must be passed to it too)."""
        return {CONTROL_FD_ENV: str(self.read_fd)}

    def started(self) -> None:
        """The worker has its copy of the read end."""
        os.close(self.read_fd)

    def saw(self, message: Message) -> None:
        """Keep an epoch's metrics; answer a checkpoint."""
        if message.kind == "metrics" and message.body.get("step") is not None:
            self._epoch = dict(message.body["values"])
        elif message.kind == "checkpoint":
            reason = self.decide(int(message.body["step"]), self._epoch)
            if reason is not None:
                self.stop_reason = reason
            with contextlib.suppress(BrokenPipeError):  # it died waiting: its exit says why
                self._answers.write("go\n" if reason is None else "stop\n")

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the worker is gone: nobody reads
            self._answers.close()
