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
:mod:`mlflow_dlaas.store.journaled_store`; this module knows files and order only.
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

from mlflow_dlaas.errors import ConfigError

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
        self._next: int | None = None  # read at the first append: a damaged one is said then

    @classmethod
    def open(cls, run_id: str, tracking_uri: str, root: Path | None = None) -> RunJournal:
        """This process's journal of ``run_id`` (created if absent, readable by its user
        only); ``tracking_uri`` is recorded with its credentials hidden, for ``resend``."""
        from mlflow_dlaas.redaction import redact_uri
        from mlflow_dlaas.store.ownership import Owner

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
        path = self.folder / ABOUT
        try:
            about = json.loads(path.read_text(errors="replace"))
        except (OSError, ValueError) as e:
            raise self._damaged(f"{path} cannot be read as a journal's record ({e})") from None
        if not isinstance(about, dict) or not isinstance(about.get("tracking_uri"), str):
            raise self._damaged(f"{path} is not a journal's record (no tracking_uri)")
        return about

    def _damaged(self, what: str) -> ConfigError:
        return ConfigError(f"journal {self.folder} is damaged: {what}; repair it by hand, or "
                           f"move it aside to send the other journals")

    @property
    def tracking_uri(self) -> str:
        """The server the run was logged to (credentials hidden)."""
        return self._about()["tracking_uri"]

    @property
    def created(self) -> float:
        """When the journal was begun (0.0 for a damaged one: it sorts first and is said)."""
        try:
            return float(self._about().get("created", 0.0))
        except (ConfigError, TypeError, ValueError):
            return 0.0

    def writer_alive(self) -> bool:
        """Whether the process that writes this journal still runs (it sends it itself)."""
        from mlflow_dlaas.store.ownership import Owner

        try:
            owner = Owner.from_tags(self._about().get("owner", {}))
        except (ConfigError, AttributeError):  # damaged: resend says so
            return False
        return owner is not None and owner.is_dead() is False

    def append(self, kind: str, **fields: Any) -> Operation:
        """Write one operation (flushed to the kernel before it is sent)."""
        with self._lock:
            if self._next is None:
                self._next = 1 + max((op.seq for op in self.operations()), default=0)
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
        """Every operation written, in order. A torn last line (a kill while writing it) is
        skipped; any other line that is not an operation makes the journal damaged
        (:class:`ConfigError`), never silently shorter."""
        path = self.folder / OPERATIONS
        if not path.exists():
            return
        lines = path.read_text(errors="replace").splitlines()
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
            except ValueError:
                if number == len(lines):
                    continue  # torn by a kill: it was never sent
                raise self._damaged(f"line {number} of {path} is not JSON") from None
            problem = _not_an_operation(record)
            if problem:
                raise self._damaged(f"line {number} of {path} is not an operation ({problem})")
            seq, kind = record.pop("seq"), record.pop("kind")
            yield Operation(seq, kind, record)

    def pending(self) -> list[Operation]:
        """The operations not yet acknowledged, in order."""
        path = self.folder / SENT
        sent = {int(s) for s in path.read_text(errors="replace").split() if s.isdigit()} \
            if path.exists() else set()  # an unreadable number: sent again, harmlessly
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


#: The fields each kind of operation carries, and their types.
_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "rest": {"api": str, "body": (str, type(None))},
    "artifacts": {"uri": str, "local": str, "path": (str, type(None)), "file": bool},
}


def _not_an_operation(record: Any) -> str | None:
    """What makes a journal line's ``record`` not an operation, or None."""
    if not isinstance(record, dict):
        return f"a {type(record).__name__}, not an object"
    if not isinstance(record.get("seq"), int) or isinstance(record.get("seq"), bool):
        return "no whole-number seq"
    fields = _FIELDS.get(record.get("kind"))  # type: ignore[arg-type]
    if fields is None:
        return f"kind {record.get('kind')!r} is neither rest nor artifacts"
    for name, kind in fields.items():
        if not isinstance(record.get(name), kind):
            return f"field {name} missing or of the wrong type"
    return None


def journals_in(paths: list[Path]) -> list[RunJournal]:
    """The journals at ``paths``: a process's folder, a run's, or a root holding runs."""
    found: dict[Path, RunJournal] = {}
    for path in paths:
        for about in (path / ABOUT, *sorted(path.glob(f"*/{ABOUT}")),
                      *sorted(path.glob(f"*/*/{ABOUT}"))):
            if about.is_file():
                found.setdefault(about.parent, RunJournal(about.parent))
    return sorted(found.values(), key=lambda j: j.created)  # a run's writers, in turn
