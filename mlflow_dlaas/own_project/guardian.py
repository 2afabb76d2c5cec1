"""A guard process that stops a watched process tree when its watcher dies, even by SIGKILL.

A process mlflow-dlaas did not write (the user's project) does not watch its launcher the
way the built-in workloads do (:mod:`mlflow_dlaas.measured_process.lifeline`): were the
study killed, the project would train on, orphaned. The guard asks Linux for SIGTERM at its parent's
death, keeps the tree's members as they come (the kernel reparents them once their parent
is gone), and stops every one still alive. Its watcher ends it with SIGKILL when the tree
ended normally. Run as ``python -m mlflow_dlaas.own_project.guardian WATCHER_PID ROOT_PID``.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

import psutil

from mlflow_dlaas.measured_process.lifeline import die_with_parent

LOOK_EVERY_S = 1.0
GRACE_S = 10.0


def _members(root: int, known: dict[int, psutil.Process]) -> None:
    """Add the tree's live members to ``known``."""
    with contextlib.suppress(psutil.Error):
        top = psutil.Process(root)
        for member in (top, *top.children(recursive=True)):
            known.setdefault(member.pid, member)


def _stop_all(known: dict[int, psutil.Process]) -> None:
    """SIGTERM every member still running (psutil checks it is the same process), SIGKILL
    those alive after the grace."""
    alive = [p for p in known.values() if p.is_running()]
    for member in alive:
        with contextlib.suppress(psutil.Error):
            member.terminate()
    _, left = psutil.wait_procs(alive, timeout=GRACE_S)
    for member in left:
        with contextlib.suppress(psutil.Error):
            member.kill()


def main(argv: list[str] | None = None) -> int:
    watcher, root = (int(a) for a in (argv or sys.argv)[1:3])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the watcher's to handle
    die_with_parent(watcher, signal.SIGTERM)
    known: dict[int, psutil.Process] = {}
    while not stop.wait(LOOK_EVERY_S):
        _members(root, known)
    _members(root, known)
    _stop_all(known)
    return 0


if __name__ == "__main__":
    sys.exit(main())
