"""Ends a run once the process that was stopped while holding it has exited.

A signal can reach ``mlflow run`` in the middle of one of its own writes to a SQLite store:
the transaction it interrupted holds the database's lock until the process exits, so the
signal handler could not end the run from inside (it waited for its own lock, then gave up
and left the run RUNNING). The handler starts this instead, in a session of its own, and
dies of the signal; this waits for it to be gone, then ends the run unless the entry point
took it over (which ends it itself).

Run as ``python -m mlflow_dlaas.store.end_after_exit PID START RUN_ID STATUS REASON URI``
(``START``: the stopped process's start token, :mod:`mlflow_dlaas.store.ownership`).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from mlflow_dlaas.console_log import console
from mlflow_dlaas.store.ownership import Owner

log = console(__name__)

#: How long to wait for the stopped process to be gone before ending its run anyway.
EXIT_WITHIN_S = 60.0


def end_after_exit(dying: Owner, run_id: str, status: str, reason: str, tracking_uri: str
                   ) -> bool:
    """Start the process that ends ``run_id`` once ``dying`` has exited; whether it started."""
    try:
        subprocess.Popen(
            [sys.executable, "-m", __name__, str(dying.pid), dying.start, run_id, status,
             reason, tracking_uri],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return False
    return True


def main(argv: Sequence[str]) -> int:
    pid, start, run_id, status, reason, tracking_uri = argv
    dying = Owner(socket.gethostname(), int(pid), start)
    deadline = time.monotonic() + EXIT_WITHIN_S
    while dying.is_dead() is False and time.monotonic() < deadline:  # a zombie is dead
        time.sleep(0.05)
    import mlflow

    from mlflow_dlaas.redaction import redact_text
    from mlflow_dlaas.store.run_ending import end_if_running

    mlflow.set_tracking_uri(tracking_uri)
    ended = end_if_running(run_id, status, reason, unless_owned=True)
    if ended:
        log.info(f"mlflow-dlaas: run {run_id} ended {status}: {redact_text(reason)}")
    elif ended is None:
        log.info(f"mlflow-dlaas: could not end run {run_id}; it stays RUNNING")
    return 0 if ended is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
