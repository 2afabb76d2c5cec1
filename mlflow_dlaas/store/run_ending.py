"""Who owns a run and who ends it: the one place to read.

**Its owner ends it**, always: the process that started it
(:func:`mlflow_dlaas.store.lifecycle.failing_run_guard`: FINISHED, FAILED with the reason,
KILLED when stopped), recorded on the run as host, PID and start time
(:class:`~mlflow_dlaas.store.ownership.Owner`). **Where the owner cannot**, another process
ends it with :func:`end_run` or :func:`end_if_running`, the reason in the run's tags:

- a study driver or ``decide``, the run of a trial it stopped;
- ``mlflow run``'s guard (:mod:`.launcher_guard`), in ``mlflow run`` of our projects only,
  the run its entry point never took over, from a fresh process once ``mlflow run`` is gone
  (:mod:`.end_after_exit`);
- an entry point handed a run that has ended already refuses it (:func:`refuse_ended_run`);
- the next command on the store, every run of this host whose owner provably died
  (:func:`end_runs_of_dead_owners`), except those whose ending waits in their journal
  (:mod:`.journal`: ``mlflow-dlaas resend`` delivers it).
"""

from __future__ import annotations

import socket

import mlflow

from mlflow_dlaas.console_log import console
from mlflow_dlaas.errors import DlaasError
from mlflow_dlaas.redaction import redact_text
from mlflow_dlaas.runs.schema import OWNER_HOST_TAG, REASON_TAG
from mlflow_dlaas.store.journal import journal_root
from mlflow_dlaas.store.ownership import Owner

log = console(__name__)

#: How many of this host's RUNNING runs one sweep looks at.
SWEEP_MAX_RUNS = 1000


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
        log.info(f"mlflow-dlaas: ended {len(ended)} run(s) whose owner process died: "
                 f"{', '.join(ended)}")
    return ended
