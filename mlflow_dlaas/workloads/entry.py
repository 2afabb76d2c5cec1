"""What every workload entry point shares: params from ``--name value`` pairs, signals, and
runs that end FAILED with the reason, even for a bad parameter under ``mlflow run``.

Light on purpose: MLflow is imported only once an entry's ``start`` step has run, so that a
worker started there imports its framework while this process imports MLflow.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from mlflow_dlaas.config import parse_cli_params
from mlflow_dlaas.console_log import configure_console_logging, console
from mlflow_dlaas.errors import EXIT_UNDELIVERED, DlaasError
from mlflow_dlaas.measured_process.lifeline import (
    Stopped,
    die_with_parent,
    stop_on_signals,
    watch_launchers,
)
from mlflow_dlaas.store.database_bounds import stalled_database_reason
from mlflow_dlaas.store.ownership import launchers_of
from mlflow_dlaas.store.tracking import configure_tracking

log = console(__name__)

R = TypeVar("R")
#: ``start(params, cleanup)``: what runs before MLflow is imported; ``cleanup`` takes what
#: must be undone when the entry ends (a started worker).
Start = Callable[[Mapping[str, str], contextlib.ExitStack], Any]


def run_entry_point(name: str, argv: Sequence[str] | None, work: Callable[[Any], R],
                    done: Callable[[R], str], *, start: Start | None = None) -> int:
    """Parse params, run ``work`` on them, print ``done(result)``; exit code 0 or the error's.

    ``start``, where given, runs first, before MLflow is imported, and ``work`` gets what it
    returns instead of the params (a training entry validates its config and starts its
    worker there). Under ``mlflow run`` the run exists before we start, so a bad parameter
    ends it FAILED with the reason; run directly, bad parameters are refused before any run
    exists.
    SIGTERM (a study's timeout, a scheduler) ends the run KILLED instead of leaving it RUNNING,
    and so does the death of the process that started us (``mlflow run``, a study driver),
    even by SIGKILL; either stop is one line and exit code 128 + the signal's number.
    """
    configure_console_logging()
    # MLflow's SQL store logs each failed statement with its traceback and then raises it;
    # the raised error is what ends the run, in one line (a full disk printed 120 lines)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    with stop_on_signals():  # still ours while a stop ends the run: later signals wait
        try:
            die_with_parent(os.getppid(), signal.SIGTERM)  # a killed launcher: our run KILLED
            # what that signal misses: a launcher beyond a shell, or one dead before we asked
            watch_launchers(launchers_of(os.environ))
            return _deliver_held(name, _run(name, argv, start, work, done))
        except Stopped as e:
            log.info(f"mlflow-dlaas {name}: {e}{_end_own_run(str(e))}")
            return _deliver_held(name, 128 + e.signum, within_s=0.0)


def _deliver_held(name: str, code: int, within_s: float | None = None) -> int:
    """Send what a tracking server did not take while the run went on (its journal); where
    it still does not answer, exit with :data:`~mlflow_dlaas.errors.EXIT_UNDELIVERED`
    (unless the run failed anyway)."""
    if "mlflow_dlaas.store.journaled_store" not in sys.modules:
        return code  # nothing was journaled (nor is MLflow to be imported: a stop mid-import)
    from mlflow_dlaas.store.lifecycle import deliver_held_writes

    held = deliver_held_writes(f"mlflow-dlaas {name}", within_s)
    return code or (EXIT_UNDELIVERED if held else 0)


def _end_own_run(reason: str) -> str:
    """End the run ``mlflow run`` gave us KILLED, if a stop came before the workload could
    (during start-up); say how it ended."""
    run_id = os.environ.get("MLFLOW_RUN_ID")
    if not run_id:
        return ""
    try:
        from mlflow_dlaas.store.run_ending import end_if_running  # MLflow, only when needed

        answered = end_if_running(run_id, "KILLED", reason) is not None
    except Exception:  # the stop cut MLflow's import in half: end the run from a clean process
        answered = _end_in_fresh_process(run_id, reason)
    if answered:
        return "; its run ended KILLED"
    return f"; its run {run_id} could not be ended: the tracking store did not answer"


def _end_in_fresh_process(run_id: str, reason: str) -> bool:
    """:func:`end_if_running` in a new interpreter (this one holds a half-imported MLflow);
    whether the store answered."""
    code = ("import sys\nfrom mlflow_dlaas.store.run_ending import end_if_running\n"
            "sys.exit(end_if_running(sys.argv[1], 'KILLED', sys.argv[2]) is None)")
    try:
        return subprocess.run([sys.executable, "-c", code, run_id, reason],
                              capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _run(name: str, argv: Sequence[str] | None, start: Start | None,
         work: Callable[[Any], R], done: Callable[[R], str]) -> int:
    try:
        params = parse_cli_params(sys.argv[1:] if argv is None else argv)
        with contextlib.ExitStack() as cleanup:
            started: Any = params
            early_error: DlaasError | None = None
            if start is not None:
                try:
                    started = start(params, cleanup)
                except DlaasError as e:  # under mlflow run, the run must say so
                    early_error = e
            if os.environ.get("MLFLOW_RUN_ID"):
                from mlflow_dlaas.store.lifecycle import failing_run_guard  # MLflow, after start
                from mlflow_dlaas.store.run_ending import refuse_ended_run

                configure_tracking(announce=False)
                refuse_ended_run(os.environ["MLFLOW_RUN_ID"])
                with failing_run_guard():
                    if early_error is not None:
                        raise early_error
                    result = work(started)
            elif early_error is not None:
                raise early_error
            else:
                result = work(started)
    except DlaasError as e:
        log.info(f"mlflow-dlaas {name}: error: {e}")
        return e.exit_code
    except Exception as e:  # a database that froze or died under us: one line, not a trace
        stalled = stalled_database_reason(e)
        if stalled is None:
            raise
        log.info(f"mlflow-dlaas {name}: error: the database server {stalled}; check it, "
                 "then run the command again")
        return 1
    log.info(done(result))
    return 0
