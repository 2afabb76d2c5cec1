"""What every workload entry point shares: params from ``--name value`` pairs, signals, and
runs that end FAILED with the reason, even for a bad parameter under ``mlflow run``."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from mlflow_dlaas.config import parse_cli_params
from mlflow_dlaas.errors import DlaasError
from mlflow_dlaas.run_lifecycle import (
    Stopped,
    end_if_running,
    failing_run_guard,
    stop_on_signals,
)
from mlflow_dlaas.tracking import configure_tracking
from mlflow_dlaas.worker.lifeline import die_with_parent

R = TypeVar("R")


def run_entry_point(name: str, argv: Sequence[str] | None,
                    work: Callable[[Mapping[str, str]], R], done: Callable[[R], str]) -> int:
    """Parse params, run ``work`` on them, print ``done(result)``; exit code 0 or the error's.

    Under ``mlflow run`` the run exists before we start, so a bad parameter ends it FAILED
    with the reason; run directly, bad parameters are refused before any run exists.
    SIGTERM (a study's timeout, a scheduler) ends the run KILLED instead of leaving it RUNNING,
    and so does the death of the process that started us (``mlflow run``, a study driver),
    even by SIGKILL; either stop is one line and exit code 128 + the signal's number.
    """
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        with stop_on_signals():
            die_with_parent(os.getppid(), signal.SIGTERM)  # a killed launcher: our run KILLED
            return _run(name, argv, work, done)
    except Stopped as e:
        print(f"mlflow-dlaas {name}: {e}{_end_own_run(str(e))}", file=sys.stderr)
        return 128 + e.signum


def _end_own_run(reason: str) -> str:
    """End the run ``mlflow run`` gave us KILLED, if a stop came before the workload could
    (during start-up); say how it ended."""
    run_id = os.environ.get("MLFLOW_RUN_ID")
    if not run_id:
        return ""
    if end_if_running(run_id, "KILLED", reason):
        return "; its run ended KILLED"
    return f"; its run {run_id} could not be ended: the tracking store did not answer"


def _run(name: str, argv: Sequence[str] | None,
         work: Callable[[Mapping[str, str]], R], done: Callable[[R], str]) -> int:
    try:
        params = parse_cli_params(sys.argv[1:] if argv is None else argv)
        if os.environ.get("MLFLOW_RUN_ID"):
            configure_tracking(announce=False)
            with failing_run_guard():
                result = work(params)
        else:
            result = work(params)
    except DlaasError as e:
        print(f"mlflow-dlaas {name}: error: {e}", file=sys.stderr)
        return e.exit_code
    print(done(result), file=sys.stderr)
    return 0
