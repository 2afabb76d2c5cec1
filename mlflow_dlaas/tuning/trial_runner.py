"""One trial replicate: a child MLflow run executed as a fresh process by MLflow Projects."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import mlflow
from mlflow.entities import Metric, Param
from mlflow.projects.submitted_run import SubmittedRun
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from mlflow_dlaas.errors import EXIT_UNDELIVERED
from mlflow_dlaas.launch import (
    end_orphaned_run,
    exit_code,
    reap,
    start_project,
    stop_project_run,
    wait_exited,
    wait_for_exit,
)
from mlflow_dlaas.runs.goals import Goal
from mlflow_dlaas.runs.schema import (
    EXIT_CODE,
    KERNEL_CPU_TIME,
    KERNEL_MAX_RSS,
    OUTAGE_TAG,
    PRUNED_TAG,
    REASON_TAG,
    TRIAL_NAME_TAG,
    WALL_TIME,
)
from mlflow_dlaas.store.interrupted_writes import release_interrupted_statements
from mlflow_dlaas.store.journaled_store import outages_seen
from mlflow_dlaas.store.ownership import owner_tags
from mlflow_dlaas.store.run_ending import end_run

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
#: A trial that failed while the tracking server did not answer: the outage may be its cause
#: (a project's own ``mlflow.log_metric`` raises), so it says nothing of its configuration
#: and its point is measured again by the study's next run.
OUTAGE_REASON = ("failed while the tracking server did not answer, which may be its cause; "
                 "measured again by the study's next run once the server is back")


class Watched(Protocol):
    """What a watch found that fails the run: the asked settings the process did not take."""

    problems: tuple[str, ...]


class Watch(Protocol):
    """What watches a child's process from outside (:class:`~mlflow_dlaas.own_project.watch.
    OutsideWatch`): the variables it needs, the launch it wraps, its start, its end."""

    def environment(self) -> dict[str, str]: ...
    def launching(self) -> contextlib.AbstractContextManager[None]: ...
    def start(self, run_id: str, pid: int) -> None: ...
    def finish(self) -> Watched: ...
    def stop(self) -> object: ...


def run_child(
    *,
    experiment_id: str,
    parent_run_id: str,
    project_uri: str,
    entry_point: str,
    params: Mapping[str, Any],
    tags: Mapping[str, str],
    env_manager: str,
    timeout_s: float,
    environment: Mapping[str, str] | None = None,
    heartbeat: Callable[[], None] | None = None,
    on_created: Callable[[str], None] | None = None,
    watch: Watch | None = None,
) -> ChildOutcome:
    """Launch the child (the MLflow Project at ``project_uri``) and wait; ``environment`` is
    added to the child's (only). With ``watch``, the child is a process that mlflow-dlaas did
    not write: it is watched from outside and its run judged here (:func:`_judged`).

    ``on_created(run_id)`` is called once the run exists, before its process starts. Never
    leaves the child RUNNING: a timeout or an interrupt cancels the process and terminates
    the run with the reason. The run's owner is this process until the entry point takes it
    over. A child that prunes itself (:mod:`~mlflow_dlaas.workloads.pruning_link`) ends its
    run KILLED and tagged :data:`PRUNED_TAG`: the outcome is PRUNED.
    """
    client = mlflow.MlflowClient()
    # Counted before the run exists: a server that dies between its creation and its params
    # must still count as an outage during this trial.
    outages = outages_seen(mlflow.get_tracking_uri())
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
    added = {**(environment or {}), **(watch.environment() if watch else {})}
    started = time.perf_counter()
    try:
        with _added_environment(added), (watch.launching() if watch else contextlib.nullcontext()):
            submitted = start_project(project_uri, entry_point, params,
                                      experiment_id=experiment_id, run_id=run_id,
                                      env_manager=env_manager)
        if watch is not None:
            watch.start(run_id, submitted.command_proc.pid)
    except Exception as e:
        return _end(client, run_id, "FAILED", f"could not launch: {type(e).__name__}: {e}")
    deadline = time.monotonic() + timeout_s
    try:
        while not _exited(submitted, watch):
            if time.monotonic() > deadline:
                if watch is not None:
                    watch.stop()
                stop_project_run(submitted)
                if client.get_run(run_id).info.status == "FINISHED" and watch is None:
                    break  # it ended just in time
                return _end(client, run_id, "TIMEOUT", f"timed out after {timeout_s:.0f} s")
            if heartbeat is not None:
                heartbeat()
    except BaseException as e:
        release_interrupted_statements(e)
        if watch is not None:
            watch.stop()
        stop_project_run(submitted)
        with contextlib.suppress(Exception):  # a store that died: the owner sweep ends it
            _end(client, run_id, "KILLED", f"its launcher stopped: {type(e).__name__}: {e}")
        raise
    if watch is not None:
        _judged(client, submitted, watch, time.perf_counter() - started)
    elif exit_code(submitted) == EXIT_UNDELIVERED:  # ran; not yet on the server
        return ChildOutcome(run_id, "FAILED", {}, UNDELIVERED_REASON)
    end_orphaned_run(client, submitted)
    final = client.get_run(run_id)
    status = final.info.status
    if final.data.tags.get(PRUNED_TAG) == "true":
        return ChildOutcome(run_id, "PRUNED", dict(final.data.metrics),
                            final.data.tags.get(REASON_TAG, "pruned"))
    if status != "FINISHED":
        reason = final.data.tags.get(REASON_TAG, f"the trial process ended {status}")
        if outages_seen(mlflow.get_tracking_uri()) > outages:
            client.set_tag(run_id, OUTAGE_TAG, OUTAGE_REASON)
            reason = f"{OUTAGE_REASON} (its own reason: {reason})"
        return ChildOutcome(run_id, "FAILED", dict(final.data.metrics), reason)
    return ChildOutcome(run_id, "FINISHED", dict(final.data.metrics))


def _exited(submitted: SubmittedRun, watch: Watch | None) -> bool:
    """Wait up to :data:`POLL_S` for the child's exit; a watched child is left unreaped (the
    watch's last sample still reads it), another is reaped at once (no poll interval lost)."""
    if watch is not None:
        return wait_exited(submitted, POLL_S)
    wait_for_exit(submitted, POLL_S)
    return submitted.get_status() != "RUNNING"


def _judged(client: mlflow.MlflowClient, submitted: SubmittedRun, watch: Watch,
            wall_s: float) -> None:
    """End a watched child's run as its process and the watch say: FAILED where the command
    failed or did not take an asked setting, else FINISHED (the user's code may not end its
    run itself); the kernel's account of its tree and its wall time logged."""
    problems = watch.finish().problems
    usage = reap(submitted)
    code = exit_code(submitted)
    run_id = submitted.run_id
    client.log_batch(run_id, metrics=[
        Metric(key, value, int(time.time() * 1000), 0) for key, value in (
            (WALL_TIME, wall_s), (EXIT_CODE, float(code)),
            (KERNEL_CPU_TIME, usage.ru_utime + usage.ru_stime),
            (KERNEL_MAX_RSS, usage.ru_maxrss * 1024.0))])
    if code != 0:
        how = (f"was killed by {signal.Signals(-code).name}" if code < 0
               else f"exited with code {code}")
        end_run(client, run_id, "FAILED", f"the project's command {how} (its output is on "
                                          "the study's console)")
    elif problems:
        end_run(client, run_id, "FAILED", "; ".join(problems))
    elif client.get_run(run_id).info.status == "RUNNING":
        client.set_terminated(run_id, "FINISHED")


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


def objective_value(outcome: ChildOutcome, goal: Goal) -> float | None:
    """The value of ``goal`` in a child: its metric's last value, or the min or max of its
    history (``reduce``); None when the child did not log it."""
    if goal.reduce == "last":
        return metric_value(outcome.metrics, goal.metric)
    history = [m.value for m in mlflow.MlflowClient().get_metric_history(outcome.run_id,
                                                                          goal.metric)
               if not math.isnan(m.value)]
    if not history:
        return None
    return min(history) if goal.reduce == "min" else max(history)
