"""Runs that always end: FAILED with the reason on error, never left RUNNING."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator, Mapping
from typing import Any

import mlflow
from mlflow.entities import Param, Run

REASON_TAG = "dlaas.failure_reason"


@contextlib.contextmanager
def failing_run_guard(*, run_name: str | None = None) -> Iterator[Run]:
    """Start (or resume, under ``mlflow run``) a run; on any error tag the reason and FAIL it.

    Nested guards share the run: only the one that started it ends it; the innermost one
    that sees an error records the reason.
    """
    owned = mlflow.active_run() is None
    run = mlflow.active_run() or mlflow.start_run(run_name=run_name)
    try:
        yield run
    except BaseException as e:
        client = mlflow.MlflowClient()
        if REASON_TAG not in client.get_run(run.info.run_id).data.tags:
            with contextlib.suppress(Exception):
                client.set_tag(run.info.run_id, REASON_TAG, f"{type(e).__name__}: {e}"[:5000])
                client.log_text(run.info.run_id, traceback.format_exc(), "failure.txt")
        if owned:
            mlflow.end_run("KILLED" if isinstance(e, KeyboardInterrupt) else "FAILED")
        raise
    if owned:
        mlflow.end_run("FINISHED")


def log_new_params(run_id: str, params: Mapping[str, Any]) -> None:
    """Log the params the run does not have yet (MLflow refuses to change a logged param)."""
    client = mlflow.MlflowClient()
    existing = client.get_run(run_id).data.params
    fresh = [Param(k, str(v)) for k, v in params.items() if k not in existing]
    for i in range(0, len(fresh), 100):
        client.log_batch(run_id, params=fresh[i : i + 100])
