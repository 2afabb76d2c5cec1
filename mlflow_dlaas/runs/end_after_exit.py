"""Ends a run once the process that was stopped while holding it has exited.

A signal can reach ``mlflow run`` in the middle of one of its own writes to a SQLite store:
the transaction it interrupted holds the database's lock until the process exits, so the
signal handler could not end the run from inside (it waited for its own lock, then gave up
and left the run RUNNING). The handler starts this instead, in a session of its own, and
dies of the signal; this waits for it to be gone, then ends the run unless the entry point
took it over (which ends it itself).

Run as ``python -m mlflow_dlaas.runs.end_after_exit PID RUN_ID STATUS REASON URI``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence

#: How long to wait for the stopped process to be gone before ending its run anyway.
EXIT_WITHIN_S = 60.0


def end_after_exit(pid: int, run_id: str, status: str, reason: str, tracking_uri: str
                   ) -> bool:
    """Start the process that ends ``run_id`` once ``pid`` has exited; whether it started."""
    try:
        subprocess.Popen(
            [sys.executable, "-m", __name__, str(pid), run_id, status, reason, tracking_uri],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return False
    return True


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a zombie (its parent has not reaped it yet) holds no lock any more
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True


def main(argv: Sequence[str]) -> int:
    pid, run_id, status, reason, tracking_uri = argv
    deadline = time.monotonic() + EXIT_WITHIN_S
    while not _gone(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    import mlflow

    from mlflow_dlaas.redaction import redact_text
    from mlflow_dlaas.runs.lifecycle import end_if_running

    mlflow.set_tracking_uri(tracking_uri)
    ended = end_if_running(run_id, status, reason, unless_owned=True)
    if ended:
        print(f"mlflow-dlaas: run {run_id} ended {status}: {redact_text(reason)}",
              file=sys.stderr)
    elif ended is None:
        print(f"mlflow-dlaas: could not end run {run_id}; it stays RUNNING", file=sys.stderr)
    return 0 if ended is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
