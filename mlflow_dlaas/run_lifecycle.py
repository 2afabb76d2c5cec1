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
    """Start (or resume, under ``mlflow run``) a run; on any error tag the reason and FAIL it."""
    run = mlflow.active_run() or mlflow.start_run(run_name=run_name)
    try:
        yield run
    except BaseException as e:
        reason = f"{type(e).__name__}: {e}"
        with contextlib.suppress(Exception):
            mlflow.set_tag(REASON_TAG, reason[:5000])
            mlflow.log_text(traceback.format_exc(), "failure.txt")
        status = "KILLED" if isinstance(e, KeyboardInterrupt) else "FAILED"
        mlflow.end_run(status)
        raise
    mlflow.end_run("FINISHED")


def log_new_params(run_id: str, params: Mapping[str, Any]) -> None:
    """Log the params the run does not have yet (MLflow refuses to change a logged param)."""
    client = mlflow.MlflowClient()
    existing = client.get_run(run_id).data.params
    fresh = [Param(k, str(v)) for k, v in params.items() if k not in existing]
    for i in range(0, len(fresh), 100):
        client.log_batch(run_id, params=fresh[i : i + 100])
