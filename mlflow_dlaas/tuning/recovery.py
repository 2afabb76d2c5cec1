"""Trials whose worker stopped: failed, retried with the same parameters, their runs marked.

A trial's worker records itself as the trial's owner (host, PID, process start time) and
refreshes a heartbeat. A RUNNING trial is given up when its owner is provably dead (this
host, PID gone or reused: at once) or, where that cannot be proved (another host), when its
heartbeat is older than :data:`STALE_AFTER_S`. A trial given up does not count toward
``n_trials``: its retry takes its place. Its child runs are tagged :data:`ORPHANED_TAG` (their
measurements are the retry's to make) and none stays RUNNING.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

import mlflow
import optuna
from optuna.trial import FrozenTrial, TrialState

from mlflow_dlaas.console_log import console
from mlflow_dlaas.measured_process.lifeline import stop_process_tree
from mlflow_dlaas.optuna_access.internals import storage_of, trial_id
from mlflow_dlaas.redaction import redact_text
from mlflow_dlaas.runs.schema import ORPHANED_TAG, REASON_TAG
from mlflow_dlaas.store.ownership import Owner
from mlflow_dlaas.store.run_ending import end_run
from mlflow_dlaas.tuning.delivery import DELIVERED_FROM_ATTR
from mlflow_dlaas.tuning.grid import GIVEN_UP_ATTR, OUTAGE_ATTR, POINT_ATTR

log = console(__name__)

HEARTBEAT_ATTR = "dlaas_heartbeat"
OWNER_ATTR = "dlaas_owner"
RUN_IDS_ATTR = "mlflow_run_ids"
REASON_ATTR = "fail_reason"
RETRY_OF_ATTR = "retry_of"
STALE_AFTER_S = 60.0
#: A RUNNING trial with no owner yet: its worker died inside ``ask()`` (a worker records
#: itself a few milliseconds after) once it is this old.
OWNERLESS_AFTER_S = 10.0


def counts(trial: FrozenTrial) -> bool:
    """Whether the trial counts toward ``n_trials``: complete, pruned, or failed on its own
    (not given up, nor failed during a tracking server's outage); a trial completed once a
    failed one's runs arrived counts as that one."""
    if trial.state == TrialState.FAIL:
        return not (trial.user_attrs.get(GIVEN_UP_ATTR) or trial.user_attrs.get(OUTAGE_ATTR))
    if DELIVERED_FROM_ATTR in trial.user_attrs:  # its failed twin, whose runs arrived, counts
        return False
    return trial.state in (TrialState.COMPLETE, TrialState.PRUNED)


def recover_stale_trials(study: optuna.Study) -> None:
    """Give up the RUNNING trials whose worker is provably dead or silent for too long."""
    now = time.time()
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        reason = _why_stale(frozen, now)
        if reason is not None:
            give_up(study, frozen, reason)


def _why_stale(trial: FrozenTrial, now: float) -> str | None:
    owner = Owner.from_tags(trial.user_attrs.get(OWNER_ATTR, {}))
    dead = owner.is_dead() if owner is not None else None
    if dead is not None:
        return f"its worker, {owner.describe()}, is gone" if dead else None
    if OWNER_ATTR not in trial.user_attrs:
        started = trial.datetime_start.timestamp() if trial.datetime_start else 0.0
        if now - trial.user_attrs.get(HEARTBEAT_ATTR, started) < OWNERLESS_AFTER_S:
            return None
        return ("its worker stopped before the trial was under way (no owner, "
                f"{'no parameters' if not trial.params else 'parameters'} recorded)")
    beat = trial.user_attrs.get(HEARTBEAT_ATTR, trial.datetime_start.timestamp())
    if now - beat < STALE_AFTER_S:
        return None
    who = f", {owner.describe()}," if owner is not None else ""
    return f"its worker{who} stopped (no heartbeat for {STALE_AFTER_S:.0f} s)"


def give_up(study: optuna.Study, trial: FrozenTrial, reason: str) -> bool:
    """Fail ``trial`` because its worker stopped, enqueue its retry, end and mark its runs.

    Returns False when another worker got there first (the trial had finished).
    """
    storage = storage_of(study)
    try:
        storage.set_trial_user_attr(trial_id(trial), REASON_ATTR, reason[:2000])
        storage.set_trial_user_attr(trial_id(trial), GIVEN_UP_ATTR, True)
        if not storage.set_trial_state_values(trial_id(trial), TrialState.FAIL):
            return False
    except RuntimeError:  # finished meanwhile: recovered by another worker, or told
        return False
    params = trial.system_attrs.get(POINT_ATTR) or trial.params  # a grid point: whole
    if params:  # else it was stopped inside ask() with nothing drawn: the sampler draws anew
        study.enqueue_trial(params, user_attrs={RETRY_OF_ATTR: trial.number})
    orphan_runs(trial.user_attrs.get(RUN_IDS_ATTR, []), reason)
    log.info(f"mlflow-dlaas: trial {trial.number} failed: {reason}; "
             f"{'it will be retried' if params else 'its settings will be drawn anew'}")
    return True


def orphan_runs(run_ids: Iterable[str], reason: str) -> None:
    """Tag the runs :data:`ORPHANED_TAG`; end one still RUNNING KILLED with ``reason``,
    stopping its process first where that can be done from here (same host)."""
    client = mlflow.MlflowClient()
    for run_id in run_ids:
        client.set_tag(run_id, ORPHANED_TAG, "true")
        run = client.get_run(run_id)
        if run.info.status != "RUNNING":
            continue
        client.set_tag(run_id, REASON_TAG, redact_text(reason)[:5000])  # the entry point keeps it
        owner = Owner.from_tags(run.data.tags)
        if owner is not None and owner.pid != os.getpid() and owner.is_dead() is False:
            stop_process_tree(owner.pid)  # the entry point ends its run KILLED on SIGTERM
        if client.get_run(run_id).info.status == "RUNNING":
            end_run(client, run_id, "KILLED", reason)
