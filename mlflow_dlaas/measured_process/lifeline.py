"""Processes that end together: children that die with their parent (even when it is killed
with SIGKILL), stop signals turned into an exception, exits without a slow teardown."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from mlflow_dlaas.store.ownership import Owner

#: Signals that stop a command the way Ctrl-C does (``timeout``, Kubernetes, a closed terminal).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
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


def adopt_orphans() -> None:
    """Ask Linux to make this process the parent of its descendants' orphans (a child
    subreaper), so that a daemon a watched command leaves behind stays in our tree, where
    :func:`stop_strays` finds it (no-op elsewhere)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def stop_strays(keep: set[int], grace_s: float = 5.0) -> list[str]:
    """SIGTERM, then after ``grace_s`` SIGKILL, every descendant of this process not in
    ``keep`` (reaping them); returns their commands, for a line saying so."""
    import psutil

    strays = [p for p in psutil.Process().children(recursive=True) if p.pid not in keep]
    named = []
    for stray in strays:
        with contextlib.suppress(psutil.Error):
            named.append(" ".join(stray.cmdline())[:80] or stray.name())
            stray.terminate()
    _, left = psutil.wait_procs(strays, timeout=grace_s)
    for stray in left:
        with contextlib.suppress(psutil.Error):
            stray.kill()
    psutil.wait_procs(left, timeout=grace_s)
    return named


def watch_launchers(launchers: Sequence[Owner], signum: int = signal.SIGTERM,
                    every_s: float = 1.0) -> None:
    """Send ``signum`` to this process once one of ``launchers`` provably died (checked
    every ``every_s`` by a daemon thread): what the parent-death signal misses when a shell
    stands between us, or when the launcher died before we could ask for that signal."""
    watched = [launcher for launcher in launchers if launcher.is_dead() is not None]
    if not watched:
        return

    def watch() -> None:
        while not any(launcher.is_dead() for launcher in watched):
            time.sleep(every_s)
        os.kill(os.getpid(), signum)

    threading.Thread(target=watch, name="dlaas-launcher-watch", daemon=True).start()


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


class Stopped(KeyboardInterrupt):
    """Raised in the main thread by SIGINT, SIGTERM or SIGHUP: cleanup runs as for Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signal.Signals(signum).name}")
        self.signum = signum


class StopSignals:
    """What the stop handler saw, and where a stop may land.

    The first signal raises :class:`Stopped` at once, except inside :meth:`deferred` (a
    store write that must not be cut in half: Optuna's ``ask``/``tell``), where it is raised
    when the section ends. A :class:`Stopped` raised where Python drops it (a weakref
    callback, a finalizer: "Exception ignored") is not lost: :meth:`check`, called at safe
    points, raises it again. With ``escalate`` (a study driver), a second signal stops the
    process at once (exit 128 + signal; the next run's sweep ends what it left RUNNING);
    without (an entry point, whose launcher may signal it again while it ends its run),
    later signals are ignored.
    """

    def __init__(self, escalate: bool = False) -> None:
        self.received: list[int] = []
        self.escalate = escalate
        self._deferring = 0

    def handle(self, signum: int, _frame: Any) -> None:
        self.received.append(signum)
        if len(self.received) > 1:
            if self.escalate:
                os.write(2, f"mlflow-dlaas: a second {signal.Signals(signum).name}: stopping "
                            "at once\n".encode())
                os._exit(128 + signum)
            return
        if not self._deferring:
            raise Stopped(signum)

    def check(self) -> None:
        """Raise :class:`Stopped` if a stop signal came (a safe point of a loop)."""
        if self.received:
            raise Stopped(self.received[0])

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A section a stop does not interrupt; a stop that came meanwhile lands at its end."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
        if not self._deferring:
            self.check()


#: The handlers :func:`stop_on_signals` installed, innermost last.
_INSTALLED: list[StopSignals] = []


@contextlib.contextmanager
def stop_on_signals(*, escalate: bool = False) -> Iterator[StopSignals]:
    """Turn :data:`STOP_SIGNALS` into :class:`Stopped` (:class:`StopSignals` says how). Off
    the main thread it installs nothing and its stop points never raise."""
    stop = StopSignals(escalate)
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.signal(sig, stop.handle) for sig in STOP_SIGNALS}
    _INSTALLED.append(stop)
    try:
        yield stop
    finally:
        _INSTALLED.remove(stop)
        for sig, old in previous.items():
            signal.signal(sig, old)


def check_for_stop() -> None:
    """A safe point of a wait loop: raise the stop that came, if Python dropped it where it
    first landed (a weakref callback, a finalizer). No-op off the main thread, or where no
    handler is installed."""
    if _INSTALLED and threading.current_thread() is threading.main_thread():
        _INSTALLED[-1].check()
