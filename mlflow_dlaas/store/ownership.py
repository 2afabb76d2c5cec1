"""Who owns a run: host, PID and process start time, and whether that owner provably died.

A PID alone proves nothing: PIDs are reused, and another machine (or container) has its own.
So an owner is recorded with its process's start time as the kernel counts it (clock ticks
since boot) and the identity of that boot and PID namespace. An owner is *provably dead*
when it was recorded on this host, in this boot and PID namespace, and its PID is now gone,
a zombie, or a process that started at another time. Anywhere else nothing can be proved
(Linux only; elsewhere nothing is ever proved). Who ends a run: :mod:`.run_ending`.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from mlflow_dlaas.runs.schema import OWNER_HOST_TAG, OWNER_PID_TAG, OWNER_START_TAG


@dataclass(frozen=True)
class Owner:
    """A process that owns a run or a trial."""

    host: str
    pid: int
    start: str  # "" where the start time cannot be read (then nothing can be proved)

    @classmethod
    def this_process(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), _start_token(os.getpid()) or "")

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> Owner | None:
        """The owner recorded in run tags (or trial attributes); None when absent or garbled."""
        try:
            return cls(tags[OWNER_HOST_TAG], int(tags[OWNER_PID_TAG]), tags[OWNER_START_TAG])
        except (KeyError, ValueError, TypeError):
            return None

    def tags(self) -> dict[str, str]:
        return {OWNER_HOST_TAG: self.host, OWNER_PID_TAG: str(self.pid),
                OWNER_START_TAG: self.start}

    def is_dead(self) -> bool | None:
        """True: provably dead; False: provably alive; None: cannot tell from here."""
        if not self.start or self.host != socket.gethostname():
            return None
        _, _, context = self.start.partition("@")
        if context != _context():
            return None  # another boot, or another PID namespace: its PIDs are not ours
        return _start_token(self.pid) != self.start

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


def owner_tags() -> dict[str, str]:
    """Tags naming this process as the owner of a run it starts."""
    return Owner.this_process().tags()


@functools.cache
def _context() -> str | None:
    """This boot and PID namespace, in which PIDs and start ticks mean one process."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def _start_token(pid: int) -> str | None:
    """``<start ticks>@<context>`` of a live process; None if gone, a zombie, or not Linux."""
    context = _context() if sys.platform.startswith("linux") else None
    if context is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces and ')'
    if fields[0] in ("Z", "X"):
        return None
    return f"{fields[19]}@{context}"


#: Names the processes that launched an entry point (a JSON list of owner tags), for its
#: watchdog: a study driver, and ``mlflow run`` between it and the entry.
LAUNCHER_ENV = "DLAAS_LAUNCHER"


def launcher_environment() -> dict[str, str]:
    """What a launcher (a study driver, the demo, ``mlflow run``) puts in the environment of
    what it starts, so that the process dies with it even across a shell in between: this
    process added to the launchers already named there."""
    import json

    named = [owner.tags() for owner in launchers_of(os.environ)]
    return {LAUNCHER_ENV: json.dumps([*named, Owner.this_process().tags()])}


def launchers_of(environ: Mapping[str, str]) -> list[Owner]:
    """The launchers named in ``environ`` (see :func:`launcher_environment`)."""
    import json

    try:
        named = json.loads(environ.get(LAUNCHER_ENV, "") or "[]")
    except ValueError:
        return []
    if not isinstance(named, list):
        return []
    found = (Owner.from_tags(tags) for tags in named if isinstance(tags, dict))
    return [owner for owner in found if owner is not None]
