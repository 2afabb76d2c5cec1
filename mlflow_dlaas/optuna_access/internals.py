"""The Optuna internals this project needs, and why each has no public equivalent in
Optuna 5 (tests/tuning/test_optuna_internals.py holds them against the installed release).

- A study's storage (``Study._storage``): a trial's reason, a retry's grid point and the
  constraint values are written to the storage by trial id while the study runs; ``Study``
  exposes no storage.
- A trial's and a study's ids (``Trial._trial_id``, ``FrozenTrial._trial_id``,
  ``Study._study_id``): the storage API is keyed by them; only the per-study ``number`` is
  public.
- The system attribute Optuna keeps constraint values under
  (``optuna.study._constrained_optimization._CONSTRAINTS_KEY``): its samplers and
  optuna-dashboard read it, and a grid or random sampler takes no ``constraints_func``.
"""

from __future__ import annotations

from typing import Any

#: Optuna's ``_CONSTRAINTS_KEY``.
CONSTRAINTS_KEY = "constraints"


def storage_of(study: Any) -> Any:
    """The ``BaseStorage`` a study reads and writes."""
    return study._storage


def trial_id(trial: Any) -> int:
    """A trial's id in its storage (a live ``Trial`` or a ``FrozenTrial``)."""
    return trial._trial_id


def study_id(study: Any) -> int:
    """A study's id in its storage."""
    return study._study_id
