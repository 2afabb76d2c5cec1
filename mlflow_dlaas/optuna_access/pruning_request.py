"""The one message between a study's driver and its trial's entry process: which Optuna trial
the entry reports its epochs to, and what it prunes on (:class:`PruningRequest`). The driver
writes it into the entry's environment; the entry takes it out before its measured worker
starts and opens the trial itself (:meth:`PruningRequest.open_trial`). It travels in one
environment variable, never in params or tags: a storage URL may carry a password."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

#: The variable that carries the request (JSON).
PRUNING_ENV = "DLAAS_PRUNING"


@dataclass(frozen=True)
class PruningRequest:
    """Report each epoch's ``metric`` to trial ``trial_id`` of ``study`` in ``storage``,
    whose ``pruner`` decides whether the trial goes on."""

    storage: str
    study: str
    trial_id: int
    pruner: str
    metric: str

    def environment(self) -> dict[str, str]:
        """The environment that carries this request to the trial's entry process."""
        return {PRUNING_ENV: json.dumps(asdict(self))}

    @classmethod
    def take_from_environment(cls) -> PruningRequest | None:
        """The request this process was started with, the variable removed; or None."""
        raw = os.environ.pop(PRUNING_ENV, None)
        return cls(**json.loads(raw)) if raw else None

    def open_trial(self) -> Any:
        """The ``optuna.Trial``, in its study with the driver's pruner."""
        import optuna

        from mlflow_dlaas.optuna_access.pruners import make_pruner
        from mlflow_dlaas.optuna_access.storage import make_storage

        storage, _ = make_storage(self.storage)
        # a sampler that leaves the trial alone (the driver's samples it)
        study = optuna.load_study(study_name=self.study, storage=storage,
                                  sampler=optuna.samplers.RandomSampler(),
                                  pruner=make_pruner(self.pruner))
        return optuna.Trial(study, self.trial_id)
