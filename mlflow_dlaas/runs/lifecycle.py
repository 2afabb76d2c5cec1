"""Runs that always end: FAILED with the reason on error, KILLED when stopped by a signal or
when their owner died, never left RUNNING."""

from __future__ import annotations

import contextlib
import errno
import socket
import sys
import traceback
from collections.abc import Iterator, Mapping
from typing import Any

import mlflow
from mlflow.entities import Param, Run

from mlflow_dlaas.errors import DiskFullError, DlaasError
from mlflow_dlaas.redaction import redact_text
from mlflow_dlaas.runs.journal import journal_root
from mlflow_dlaas.runs.ownership import Owner, owner_tags
from mlflow_dlaas.runs.schema import OWNER_HOST_TAG, REASON_TAG
from mlflow_dlaas.runs.tracking import mark_model_development

#: How many of this host's RUNNING runs one sweep looks at.
SWEEP_MAX_RUNS = 1000


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


def end_run(client: mlflow.MlflowClient, run_id: str, status: str, reason: str) -> None:
    """End ``run_id`` with ``status`` (FAILED, KILLED) and the reason in :data:`REASON_TAG`."""
    client.set_tag(run_id, REASON_TAG, redact_text(reason)[:5000])
    client.set_terminated(run_id, status)


#: How long ending a run tries again while the store is busy: SQLite's writers that both read
#: first get "database is locked" at once, without waiting (a stopped ``mlflow run`` and its
#: entry point end the run at the same moment).
BUSY_STORE_RETRY_S = 10.0


def end_if_running(run_id: str, status: str, reason: str, *,
                   unless_owned: bool = False) -> bool | None:
    """End ``run_id`` with ``status`` and the reason unless it has ended already (or, with
    ``unless_owned``, a process has taken it over, which ends it itself). True: ended now;
    False: nothing to end; None: the store could not be asked (the owner sweep is the
    backstop)."""
    import time

    client = mlflow.MlflowClient()
    deadline = time.monotonic() + BUSY_STORE_RETRY_S
    while True:
        try:
            run = client.get_run(run_id)
            if run.info.status != "RUNNING" or \
                    unless_owned and Owner.from_tags(run.data.tags) is not None:
                return False
            end_run(client, run_id, status, reason)
            return True
        except Exception as e:
            if "database is locked" not in str(e) or time.monotonic() > deadline:
                return None
            time.sleep(0.2)


def refuse_ended_run(run_id: str) -> None:
    """Raise where the run ``mlflow run`` handed us has ended already (its launcher was
    stopped while we started, and ended the run): taking it would set it RUNNING again and
    measure what the user stopped."""
    try:
        run = mlflow.MlflowClient().get_run(run_id)
    except Exception:  # a store that does not answer: starting the run says so
        return
    if run.info.status != "RUNNING":
        said = run.data.tags.get(REASON_TAG)
        raise DlaasError(f"run {run_id} has ended {run.info.status}"
                         f"{f' ({said})' if said else ''}; nothing was measured into it, "
                         "as a run is measured once: start a new run")


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
    except BaseException:  # stopped inside start_run: MLflow would end it FINISHED at exit
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
        client = mlflow.MlflowClient()
        with contextlib.suppress(Exception):
            if REASON_TAG not in client.get_run(run.info.run_id).data.tags:
                client.set_tag(run.info.run_id, REASON_TAG, reason[:5000])
                if disk_full is None:
                    client.log_text(run.info.run_id, redact_text(traceback.format_exc()),
                                    "failure.txt")
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


def end_runs_of_dead_owners(client: mlflow.MlflowClient) -> list[str]:
    """End KILLED, with the reason, this host's RUNNING runs whose owner provably died.

    One search: RUNNING runs tagged with this host as owner, in every experiment. Runs of
    other hosts, owners that cannot be judged from here, and runs with a journal here
    (``mlflow-dlaas resend`` delivers how they ended) are left alone.
    """
    experiments = [e.experiment_id for e in client.search_experiments(max_results=1000)]
    if not experiments:
        return []
    query = (f"attributes.status = 'RUNNING' and "
             f"tags.`{OWNER_HOST_TAG}` = '{socket.gethostname()}'")
    ended = []
    for run in client.search_runs(experiments, query, max_results=SWEEP_MAX_RUNS):
        owner = Owner.from_tags(run.data.tags)
        if (journal_root() / run.info.run_id).exists():
            continue  # its ending may wait in its journal: resent, or swept once it is
        if owner is not None and owner.is_dead():
            end_run(client, run.info.run_id, "KILLED",
                    f"its owner, {owner.describe()}, is gone without ending it (it was "
                    "killed, or could not reach the store to end it)")
            ended.append(run.info.run_id)
    if ended:
        print(f"mlflow-dlaas: ended {len(ended)} run(s) whose owner process died: "
              f"{', '.join(ended)}", file=sys.stderr)
    return ended


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
    :data:`~mlflow_dlaas.runs.journaled_store.DELIVER_WITHIN_S`); where it still does not
    answer, say in one line per run how to send it later (prefixed ``label``). Whether any
    run still holds writes."""
    journaled = sys.modules.get("mlflow_dlaas.runs.journaled_store")  # only where it was used
    if journaled is None:
        return False
    held = journaled.deliver_held(within_s)
    for journal in held:
        print(f"{label}: {journaled.undelivered(journal)}", file=sys.stderr)
    return bool(held)

