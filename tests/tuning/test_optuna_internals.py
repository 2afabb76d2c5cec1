"""The Optuna internals the studies rely on (mlflow_dlaas/optuna_access/internals.py) hold
in the installed release: a new Optuna that moves one fails here, not in a study."""

from __future__ import annotations

import optuna
from optuna.study._constrained_optimization import _CONSTRAINTS_KEY

from mlflow_dlaas.optuna_access import internals


def test_the_constraints_key_is_optunas() -> None:
    assert internals.CONSTRAINTS_KEY == _CONSTRAINTS_KEY


def test_storage_and_ids_reach_the_trial_optuna_keeps() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="internals")
    trial = study.ask()
    storage = internals.storage_of(study)
    assert isinstance(storage, optuna.storages.BaseStorage)
    storage.set_trial_user_attr(internals.trial_id(trial), "seen", True)
    frozen = storage.get_trial(storage.get_trial_id_from_study_id_trial_number(
        internals.study_id(study), trial.number))
    assert frozen.user_attrs == {"seen": True}
    assert internals.trial_id(frozen) == internals.trial_id(trial)
