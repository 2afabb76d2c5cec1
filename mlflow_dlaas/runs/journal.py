"""A run's local journal: everything our processes log to a tracking server is written here
first, then sent, so that a server that goes away loses nothing.

One folder per run and writing process under :func:`journal_root` (``RUN_ID/PID``: the
workers of a study all write its parent run): ``journal.jsonl`` (one operation a line,
numbered), ``sent`` (the numbers the server acknowledged) and ``artifacts/N/`` (copies of
files that could not be uploaded when they were logged). A folder whose every operation was
sent is removed; one that is left is replayed, in order, by ``mlflow-dlaas resend``.
Replaying is idempotent: an operation sent twice (a stop between sending it and noting it)
writes the same metric, param, tag, status or file again, which the server keeps once.

The MLflow side (which calls are journaled, how one is sent) is
:mod:`mlflow_dlaas.runs.journaled_store`; this module knows files and order only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Where journals live (default: ``$XDG_STATE_HOME/mlflow-dlaas/journal``).
JOURNAL_ENV = "MLFLOW_DLAAS_JOURNAL_DIR"
OPERATIONS = "journal.jsonl"
SENT = "sent"
ABOUT = "about.json"
ARTIFACT_COPIES = "artifacts"


def journal_root() -> Path:
    """The folder holding one journal folder per run."""
    configured = os.environ.get(JOURNAL_ENV)
    if configured:
        return Path(configured).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "mlflow-dlaas" / "journal"


@dataclass(frozen=True)
class Operation:
    """One journaled write: ``kind`` is ``rest`` (an MLflow REST call: ``api`` and its JSON
    ``body``) or ``artifacts`` (``local``, a copy in the journal, logged under ``path`` of
    the artifact root ``uri``)."""

    seq: int
    kind: str
    fields: dict[str, Any]


class RunJournal:
    """The journal of one run; safe to use from several threads of one process."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._next = 1 + max((op.seq for op in self.operations()), default=0)

    @classmethod
    def open(cls, run_id: str, tracking_uri: str, root: Path | None = None) -> RunJournal:
        """This process's journal of ``run_id`` (created if absent, readable by its user
        only); ``tracking_uri`` is recorded with its credentials hidden, for ``resend``."""
        from mlflow_dlaas.redaction import redact_uri
        from mlflow_dlaas.runs.ownership import Owner

        folder = (root or journal_root()) / run_id / str(os.getpid())
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        about = folder / ABOUT
        if not about.exists():
            about.write_text(json.dumps({"run_id": run_id, "created": time.time(),
                                         "tracking_uri": redact_uri(tracking_uri),
                                         "owner": Owner.this_process().tags()}))
        return cls(folder)

    @property
    def run_id(self) -> str:
        return self.folder.parent.name

    def _about(self) -> dict[str, Any]:
        return json.loads((self.folder / ABOUT).read_text())

    @property
    def tracking_uri(self) -> str:
        """The server the run was logged to (credentials hidden)."""
        return self._about()["tracking_uri"]

    @property
    def created(self) -> float:
        return float(self._about().get("created", 0.0))

    def writer_alive(self) -> bool:
        """Whether the process that writes this journal still runs (it sends it itself)."""
        from mlflow_dlaas.runs.ownership import Owner

        owner = Owner.from_tags(self._about().get("owner", {}))
        return owner is not None and owner.is_dead() is False

    def append(self, kind: str, **fields: Any) -> Operation:
        """Write one operation (flushed to the kernel before it is sent)."""
        with self._lock:
            op = Operation(self._next, kind, fields)
            self._next += 1
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(self.folder / OPERATIONS, "a") as out:
                out.write(json.dumps({"seq": op.seq, "kind": kind, **fields}) + "\n")
            return op

    def copy_of(self, seq: int) -> Path:
        """Where the files of operation ``seq`` are kept (a file in a folder of its own)."""
        return self.folder / ARTIFACT_COPIES / str(seq)

    def copy_artifacts(self, seq: int, local: Path) -> Path:
        """A copy of ``local`` (a file or a folder) kept for operation ``seq``."""
        copy = self.copy_of(seq)
        shutil.rmtree(copy, ignore_errors=True)
        if local.is_dir():
            shutil.copytree(local, copy)
        else:
            copy.mkdir(parents=True)
            shutil.copy2(local, copy / local.name)
        return copy

    def mark_sent(self, seq: int) -> None:
        with self._lock:
            if self.folder.exists():
                with open(self.folder / SENT, "a") as out:
                    out.write(f"{seq}\n")

    def forget_delivered(self) -> None:
        """Empty the journal when everything in it was sent (a long run's stays small)."""
        with self._lock:
            if not self.pending():
                for name in (OPERATIONS, SENT):
                    (self.folder / name).unlink(missing_ok=True)

    def operations(self) -> Iterator[Operation]:
        """Every operation written, in order (a torn last line, from a kill, is skipped)."""
        path = self.folder / OPERATIONS
        if not path.exists():
            return
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            seq, kind = record.pop("seq"), record.pop("kind")
            yield Operation(seq, kind, record)

    def pending(self) -> list[Operation]:
        """The operations not yet acknowledged, in order."""
        path = self.folder / SENT
        sent = {int(s) for s in path.read_text().split() if s.isdigit()} if path.exists() \
            else set()
        return [op for op in self.operations() if op.seq not in sent]

    def remove_if_delivered(self) -> bool:
        """Remove the folder when nothing is pending; whether it did."""
        with self._lock:
            if self.pending():
                return False
            shutil.rmtree(self.folder, ignore_errors=True)
            with contextlib.suppress(OSError):  # the run's folder, once no process has one
                self.folder.parent.rmdir()
            return True


def journals_in(paths: list[Path]) -> list[RunJournal]:
    """The journals at ``paths``: a process's folder, a run's, or a root holding runs."""
    found: dict[Path, RunJournal] = {}
    for path in paths:
        for about in (path / ABOUT, *sorted(path.glob(f"*/{ABOUT}")),
                      *sorted(path.glob(f"*/*/{ABOUT}"))):
            if about.is_file():
                found.setdefault(about.parent, RunJournal(about.parent))
    return sorted(found.values(), key=lambda j: j.created)  # a run's writers, in turn
