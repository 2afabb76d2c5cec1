"""A run from start to end in the process that owns it: FAILED with the reason on error (a
full disk said in one line), KILLED when stopped, FINISHED otherwise; its params and the tags
several workers share. Who owns a run and who else may end it: :mod:`.ownership`."""

from __future__ import annotations

import contextlib
import errno
import sys
import traceback
from collections.abc import Iterator, Mapping
from typing import Any

import mlflow
from mlflow.entities import Param, Run

from mlflow_dlaas.console_log import console
from mlflow_dlaas.errors import DiskFullError
from mlflow_dlaas.redaction import redact_text
from mlflow_dlaas.runs.schema import REASON_TAG
from mlflow_dlaas.store.experiments import mark_model_development
from mlflow_dlaas.store.interrupted_writes import release_interrupted_statements
from mlflow_dlaas.store.ownership import owner_tags

log = console(__name__)

#: Attempts at writing tags that other workers may write at the same moment.
SHARED_TAG_ATTEMPTS = 4


def set_shared_tags(client: mlflow.MlflowClient, run_id: str, tags: Mapping[str, str]) -> None:
    """Set tags on a run that several workers write (a study's parent): MLflow's SQL store
    inserts a tag it did not find, so two workers setting one new key at once make one of
    them fail on the unique key; the loser tries again, and then updates it."""
    import time

    from mlflow.entities import RunTag
    from mlflow.exceptions import MlflowException

    for attempt in range(1, SHARED_TAG_ATTEMPTS + 1):
        try:
            client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])
            return
        except MlflowException as e:
            if "UNIQUE constraint" not in str(e) and "UniqueViolation" not in str(e) \
                    or attempt == SHARED_TAG_ATTEMPTS:
                raise
            time.sleep(0.05 * attempt)


#: What a full disk looks like in an error: the errno, or SQLite's words for it.
_DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_DISK_FULL_WORDS = ("database or disk is full", "No space left on device",
                    "Disk quota exceeded")


def disk_full_reason(error: BaseException) -> str | None:
    """One line saying which disk filled up when ``error`` (or one it came from) is a full
    disk; None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DiskFullError):
            return str(current)
        if isinstance(current, OSError) and current.errno in _DISK_FULL_ERRNOS:
            target = current.filename2 or current.filename  # a copy's destination
            where = f" writing {target}" if target else ""
            return f"the disk is full ({current.strerror}{where}); free space there and rerun"
        said = str(current)
        if any(words in said for words in _DISK_FULL_WORDS):
            return (f"the disk is full ({next(w for w in _DISK_FULL_WORDS if w in said)}); "
                    "free space on the disk of the tracking store and its artifacts, and rerun")
        current = current.__cause__ or current.__context__
    return None


@contextlib.contextmanager
def failing_run_guard(*, run_name: str | None = None) -> Iterator[Run]:
    """Start (or resume, under ``mlflow run``) a run; on any error tag the reason and FAIL it.

    Nested guards share the run: only the one that started it ends it, and tags this process
    as its owner; the innermost one that sees an error records the reason. A full disk is
    raised on as :class:`DiskFullError` (one line, no traceback), saying whether the run
    could still be ended.
    """
    owned = mlflow.active_run() is None
    try:
        run = mlflow.active_run() or mlflow.start_run(run_name=run_name)
    except BaseException as e:  # stopped inside start_run: MLflow would end it FINISHED at exit
        release_interrupted_statements(e)
        if owned and mlflow.active_run() is not None:
            mlflow.end_run("KILLED")
        raise
    try:
        if owned:  # inside the guard: a stop while tagging ends the run KILLED, not FINISHED
            mlflow.set_tags(owner_tags())
            mark_model_development(
                mlflow.MlflowClient().get_experiment(run.info.experiment_id))
        yield run
    except BaseException as e:
        disk_full = disk_full_reason(e)
        reason = disk_full or redact_text(f"{type(e).__name__}: {e}")
        trace = redact_text(traceback.format_exc())
        release_interrupted_statements(e)
        client = mlflow.MlflowClient()
        with contextlib.suppress(Exception):
            if REASON_TAG not in client.get_run(run.info.run_id).data.tags:
                client.set_tag(run.info.run_id, REASON_TAG, reason[:5000])
                if disk_full is None:
                    client.log_text(run.info.run_id, trace, "failure.txt")
        ended = True
        if owned:
            # an error may name its run's status (a pruned trial's run ends KILLED)
            status = getattr(e, "run_status", None) \
                or ("KILLED" if isinstance(e, KeyboardInterrupt) else "FAILED")
            try:
                mlflow.end_run(status)
            except Exception:
                ended = False
                if disk_full is None:
                    raise
        if disk_full is not None and not isinstance(e, DiskFullError):
            raise DiskFullError(
                f"{disk_full}; " + ("its run ended FAILED" if ended else
                                    f"its run {run.info.run_id} could not be ended either: the "
                                    "next mlflow-dlaas command on this store ends it")) from None
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


def deliver_held_writes(label: str, within_s: float | None = None) -> bool:
    """At the end of a process: send what a tracking server did not take while its runs
    went on (their journals; for at most ``within_s``, default
    :data:`~mlflow_dlaas.store.journaled_store.DELIVER_WITHIN_S`); where it still does not
    answer, say in one line per run how to send it later (prefixed ``label``). Whether any
    run still holds writes."""
    journaled = sys.modules.get("mlflow_dlaas.store.journaled_store")  # only where it was used
    if journaled is None:
        return False
    held = journaled.deliver_held(within_s)
    for journal in held:
        log.info(f"{label}: {journaled.undelivered(journal)}")
    return bool(held)

