"""The pipe between the measured worker and its entry process: one JSON object per line.

The worker side (:class:`WorkerChannel`) imports nothing heavy; the entry side reads the
lines with :func:`decode` in a thread that only marks phase edges on the monitor, so a
boundary lands within a sample's time of the worker's edge. Each edge carries the worker's
wall-clock time too: edges sent before the entry's monitor started (the worker may start
first) are placed where they happened.

A second pipe carries the entry's answers back, one line each, ``go`` or ``stop``: once
before the first measured phase (the worker holds until the entry's monitor watches it), and,
where the entry decides whether training goes on (a study's pruner), after each epoch's
``checkpoint`` (:class:`Checkpoints` on the entry side). Without the pipe the worker never
waits.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from mlflow_dlaas.errors import DlaasError, error_record

FD_ENV = "DLAAS_WORKER_FD"
DIR_ENV = "DLAAS_WORKER_DIR"
#: The pipe the worker reads the entry's answers from (absent: no waiting).
CONTROL_FD_ENV = "DLAAS_WORKER_CONTROL_FD"
#: Set where the entry answers each epoch's checkpoint (a pruner decides); else none is sent.
CHECKPOINTS_ENV = "DLAAS_WORKER_CHECKPOINTS"


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
        self._checkpoints = bool(os.environ.get(CHECKPOINTS_ENV))

    def send(self, kind: str, **body: Any) -> None:
        if self._out is not None:
            self._out.write(json.dumps({"kind": kind, **body}, default=float) + "\n")

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Mark a measured window; the entry samples the worker at both edges."""
        self.send("phase", name=name, edge="start", t=time.time())
        try:
            yield
        finally:
            self.send("phase", name=name, edge="end", t=time.time())

    def wait_until_watched(self) -> None:
        """Before the first measured phase: hold until the entry's monitor watches us (the
        entry may still be starting up, its MLflow import overlapping our framework's)."""
        if self._control is not None:
            self.send("ready")
            _await_go(self._control, "before the first measured phase")

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
        if self._control is None or not self._checkpoints:
            return
        self.send("checkpoint", step=step)
        _await_go(self._control, f"after epoch {step}")

    def result(self, **values: Any) -> None:
        self.send("result", **values)

    def error(self, error: DlaasError) -> None:
        self.send("error", **error_record(error))


def _await_go(control: IO[str], where: str) -> None:
    answer = control.readline().strip()
    if answer != "go":
        raise StopRequested(f"stopped {where}: the entry process asked "
                            f"({answer or 'it closed the pipe'})")


#: The entry's validated configuration, as JSON params, in the run-scoped folder: what the
#: worker reads (never its argv parsed again).
CONFIG_FILE = "config.json"


def entry_config() -> dict[str, Any]:
    """The configuration the entry validated and wrote for this worker (:data:`CONFIG_FILE`
    in the run-scoped folder)."""
    import json

    return json.loads((Path(os.environ[DIR_ENV]) / CONFIG_FILE).read_text())


def worker_dir() -> Path:
    """A fresh folder inside the run-scoped folder the entry removes when the run ends."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="dlaas-", dir=os.environ.get(DIR_ENV)))


class Checkpoints:
    """The entry's side of the checkpoints: ``decide(step, metrics)`` gets each epoch's
    metrics and returns None to go on or why to stop; ``answer`` sends it back at once."""

    def __init__(self, decide: Callable[[int, Mapping[str, float]], str | None],
                 answer: Callable[[str], None]) -> None:
        self.decide, self._answer = decide, answer
        self._epoch: dict[str, float] = {}
        #: why the worker was told to stop, once it was
        self.stop_reason: str | None = None

    def saw(self, message: Message) -> None:
        """Keep an epoch's metrics; answer a checkpoint."""
        if message.kind == "metrics" and message.body.get("step") is not None:
            self._epoch = dict(message.body["values"])
        elif message.kind == "checkpoint":
            reason = self.decide(int(message.body["step"]), self._epoch)
            if reason is not None:
                self.stop_reason = reason
            self._answer("go" if reason is None else "stop")
