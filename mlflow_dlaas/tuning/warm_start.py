"""A study started from an earlier one (``--warm-start STUDY``, same storage). Where this
host's fingerprint and software match the earlier study's (the same fingerprint class:
CPU, cores allowed, ISA, memory, versions), the earlier complete trials are added with their
values, their settings and their runs' links (a grid does not measure those points again).
Where they differ, the earlier best points are queued to be measured first here."""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from mlflow_dlaas.console_log import console
from mlflow_dlaas.environment import fingerprint, host_class
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.tuning.feasibility import is_feasible
from mlflow_dlaas.tuning.sampling import distributions
from mlflow_dlaas.tuning.spec import StudySpec

log = console(__name__)

#: the study's attribute holding the fingerprint class of the host that created it
FINGERPRINT_ATTR = "dlaas_fingerprint_class"
#: set on a trial copied from an earlier study: ``<study> trial <number>``
WARM_FROM_ATTR = "dlaas_warm_start_from"
#: earlier best points queued where the fingerprints differ
BEST_QUEUED = 3


def record_fingerprint(study: optuna.Study) -> None:
    """Note the creating host's fingerprint class on a new study."""
    study.set_user_attr(FINGERPRINT_ATTR, host_class(fingerprint()))


def earlier_study(storage: optuna.storages.BaseStorage, spec: StudySpec) -> optuna.Study:
    """The study ``spec.warm_start`` names, checked before anything is made: it exists in
    ``storage`` and optimized the same directions."""
    name = spec.warm_start
    try:
        earlier = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise ConfigError(f"--warm-start {name!r}: no such study in this storage; name a "
                          "study of the same --storage") from None
    if [d.name.lower() for d in earlier.directions] != spec.directions:
        raise ConfigError(f"--warm-start {name!r}: it optimized "
                          f"{[d.name.lower() for d in earlier.directions]}, this spec "
                          f"{spec.directions}; warm-start only from a study of the same "
                          "objectives")
    return earlier


def warm_start(study: optuna.Study, spec: StudySpec, earlier: optuna.Study) -> str:
    """Start the new ``study`` from ``earlier``; the line that says what was done."""
    earlier_name = earlier.study_name
    fits = [t for t in earlier.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if _fits(t, spec)]
    here = study.user_attrs.get(FINGERPRINT_ATTR)
    there = earlier.user_attrs.get(FINGERPRINT_ATTR)
    if here is not None and here == there:
        current = distributions(spec)
        study.add_trials([optuna.trial.create_trial(
            state=TrialState.COMPLETE, values=t.values,
            params={k: t.params[k] for k in current}, distributions=current,
            user_attrs={**t.user_attrs, WARM_FROM_ATTR: f"{earlier_name} trial {t.number}"},
            system_attrs=t.system_attrs) for t in fits])
        return (f"warm start: {len(fits)} complete trials of {earlier_name!r} added with their "
                f"values (same fingerprint class, {here})")
    best = _best(fits, spec)[:BEST_QUEUED]
    for trial in best:
        study.enqueue_trial(dict(trial.params), user_attrs={
            WARM_FROM_ATTR: f"{earlier_name} trial {trial.number} (queued)"})
    return (f"warm start: {earlier_name!r} ran on another kind of host ({there or 'unknown'}; "
            f"this one: {here}): its {len(best)} best points are queued to be measured "
            "first here")


def _fits(trial: FrozenTrial, spec: StudySpec) -> bool:
    """Whether the trial's settings are a point of this spec's search space."""
    current = distributions(spec)
    if set(trial.params) != set(current):
        return False
    try:
        return all(d._contains(d.to_internal_repr(trial.params[name]))
                   for name, d in current.items())
    except (ValueError, TypeError):
        return False


def _best(trials: list[FrozenTrial], spec: StudySpec) -> list[FrozenTrial]:
    """The feasible trials, best first (by the first objective)."""
    feasible = [t for t in trials if is_feasible(t)]
    return sorted(feasible, key=lambda t: t.values[0],
                  reverse=spec.directions[0] == "maximize")
