"""Children that die with their parent, even when the parent is killed with SIGKILL."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def die_with_parent(parent_pid: int | None = None, signum: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``signum`` to this process when its parent dies (no-op elsewhere).

    With ``parent_pid``, a parent that died before the request took effect ends us now.
    """
    if _LIBC is None:
        return
    _LIBC.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), signum)


def exit_without_teardown(code: int) -> None:
    """Exit once the work is done: atexit handlers and flushed streams, then ``os._exit``.

    The interpreter's own teardown after a framework has been imported (PyTorch's module
    graph, above all) takes about 1.8 s here and serves nothing: everything is logged and
    closed by then. A study pays it once per trial.
    """
    import atexit
    import logging

    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def stop_process_tree(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM process ``pid`` and all its descendants; SIGKILL those alive after grace,
    and wait for them."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    for member in tree:
        try:
            member.terminate()
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(tree, timeout=grace_s)
    for member in alive:
        try:
            member.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=grace_s)
