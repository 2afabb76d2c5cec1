"""Say once when another worker of the study runs a trial on this machine at the same time.

Two trials measured side by side share the cores, the memory bandwidth and the caches, and
two programs whose OpenMP threads spin while they wait can each train many times slower
than alone (docs/libraries.md, "Side by side: the wait policy"). Each run's validity verdict
says afterwards that other processes used the cores; this says it when it starts happening.
Only a worker recorded on this host (same host name) and provably alive is counted: a
container on the same machine with a host name of its own is not seen.
"""

from __future__ import annotations

import socket

import optuna
from optuna.trial import FrozenTrial, TrialState

from mlflow_dlaas.console_log import console
from mlflow_dlaas.store.ownership import Owner
from mlflow_dlaas.tuning.recovery import OWNER_ATTR

log = console(__name__)


def trials_beside(study: optuna.Study, trial_number: int) -> list[tuple[FrozenTrial, Owner]]:
    """The study's other RUNNING trials whose worker is another live process on this host."""
    host, me = socket.gethostname(), Owner.this_process().pid
    found = []
    for other in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = Owner.from_tags(other.user_attrs.get(OWNER_ATTR) or {})
        if (other.number != trial_number and owner is not None and owner.host == host
                and owner.pid != me and owner.is_dead() is False):
            found.append((other, owner))
    return found


class SharedMachineNotice:
    """Prints the warning the first time a trial of this worker starts beside another's."""

    def __init__(self) -> None:
        self._said = False

    def check(self, study: optuna.Study, trial_number: int) -> None:
        if self._said:
            return
        beside = trials_beside(study, trial_number)
        if not beside:
            return
        self._said = True
        others = ", ".join(f"trial {t.number} ({o.describe()})" for t, o in beside)
        log.info(f"mlflow-dlaas: warning: trial {trial_number} runs on this machine beside "
                 f"{others} of another worker of this study: their measurements share its "
                 "cores and each run's validity verdict will say so; for clean figures run one "
                 "worker per machine, or measure the wait policy (omp_wait_policy: [active, "
                 "passive]; docs/libraries.md)")
