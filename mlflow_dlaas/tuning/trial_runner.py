"""One trial replicate: a child MLflow run executed as a fresh process by MLflow Projects."""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import mlflow
from mlflow.entities import Param
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from mlflow_dlaas.errors import EXIT_UNDELIVERED
from mlflow_dlaas.launch import (
    end_orphaned_run,
    exit_code,
    start_project_run,
    stop_project_run,
    wait_for_exit,
)
from mlflow_dlaas.runs.lifecycle import end_run
from mlflow_dlaas.runs.ownership import owner_tags
from mlflow_dlaas.runs.schema import PRUNED_TAG, REASON_TAG, TRIAL_NAME_TAG

POLL_S = 0.25


@dataclass(frozen=True)
class ChildOutcome:
    """How a child run ended and what it logged."""

    run_id: str
    status: str  # FINISHED | FAILED | KILLED | PRUNED | TIMEOUT
    metrics: dict[str, float] = field(default_factory=dict)
    reason: str = ""


#: A trial whose entry ran to its end while the tracking server did not answer: its run is
#: ended in its journal, and its figures are not on the server to be read.
UNDELIVERED_REASON = ("the tracking server did not take its results (they wait in the run's "
                      "journal: mlflow-dlaas resend sends them); rerun the study once it is back")


def run_child(
    *,
    experiment_id: str,
    parent_run_id: str,
    framework: str,
    entry_point: str,
    params: Mapping[str, Any],
    tags: Mapping[str, str],
    env_manager: str,
    timeout_s: float,
    environment: Mapping[str, str] | None = None,
    heartbeat: Callable[[], None] | None = None,
    on_created: Callable[[str], None] | None = None,
) -> ChildOutcome:
    """Launch the child and wait; ``environment`` is added to the child's (only).

    ``on_created(run_id)`` is called once the run exists, before its process starts. Never
    leaves the child RUNNING: a timeout or an interrupt cancels the process and terminates
    the run with the reason. The run's owner is this process until the entry point takes it
    over. A child that prunes itself (:mod:`~mlflow_dlaas.workloads.pruning_link`) ends its
    run KILLED and tagged :data:`PRUNED_TAG`: the outcome is PRUNED.
    """
    client = mlflow.MlflowClient()
    run = client.create_run(
        experiment_id,
        run_name=tags.get(TRIAL_NAME_TAG),
        tags={MLFLOW_PARENT_RUN_ID: parent_run_id, **owner_tags(), **tags},
    )
    run_id = run.info.run_id
    if on_created is not None:
        on_created(run_id)
    # Logged here, so that a trial that fails before logging anything still shows its params.
    client.log_batch(run_id, params=[Param(k, str(v)) for k, v in params.items()])
    try:
        with _added_environment(environment or {}):
            submitted = start_project_run(framework, entry_point, params,
                                          experiment_id=experiment_id, run_id=run_id,
                                          env_manager=env_manager)
    except Exception as e:
        return _end(client, run_id, "FAILED", f"could not launch: {type(e).__name__}: {e}")
    deadline = time.monotonic() + timeout_s
    try:
        while submitted.get_status() == "RUNNING":
            if time.monotonic() > deadline:
                stop_project_run(submitted)
                if client.get_run(run_id).info.status == "FINISHED":  # it ended just in time
                    break
                return _end(client, run_id, "TIMEOUT", f"timed out after {timeout_s:.0f} s")
            if heartbeat is not None:
                heartbeat()
            wait_for_exit(submitted, POLL_S)  # no poll interval lost per trial
    except BaseException as e:
        stop_project_run(submitted)
        _end(client, run_id, "KILLED", f"the study worker stopped: {type(e).__name__}: {e}")
        raise
    if exit_code(submitted) == EXIT_UNDELIVERED:  # ran; not yet on the server
        return ChildOutcome(run_id, "FAILED", {}, UNDELIVERED_REASON)
    end_orphaned_run(client, submitted)
    final = client.get_run(run_id)
    status = final.info.status
    if final.data.tags.get(PRUNED_TAG) == "true":
        return ChildOutcome(run_id, "PRUNED", dict(final.data.metrics),
                            final.data.tags.get(REASON_TAG, "pruned"))
    if status != "FINISHED":
        reason = final.data.tags.get(REASON_TAG, f"the trial process ended {status}")
        return ChildOutcome(run_id, "FAILED", dict(final.data.metrics), reason)
    return ChildOutcome(run_id, "FINISHED", dict(final.data.metrics))


@contextlib.contextmanager
def _added_environment(extra: Mapping[str, str]) -> Iterator[None]:
    """``extra`` in this process's environment while the child starts (MLflow Projects gives
    the child a copy of it), then as before."""
    saved = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _end(client: mlflow.MlflowClient, run_id: str, status: str, reason: str) -> ChildOutcome:
    end_run(client, run_id, "KILLED" if status == "KILLED" else "FAILED", reason)
    return ChildOutcome(run_id, status, dict(client.get_run(run_id).data.metrics), reason)


def metric_value(metrics: Mapping[str, float], key: str) -> float | None:
    """``key`` from a child's metrics; None when absent or NaN."""
    value = metrics.get(key)
    return None if value is None or math.isnan(value) else float(value)
