"""A grid study measures every point exactly once, by value: whatever the seed, a resume that
seeds its sampler anew, a worker stopped right after ``ask()``, or a trial holding part of a
point."""

from __future__ import annotations

import time

import optuna
import pytest
from optuna.trial import TrialState

from mlflow_dlaas.measured_process.lifeline import StopSignals
from mlflow_dlaas.tuning import recovery
from mlflow_dlaas.tuning.grid import POINT_ATTR, GridByValue
from mlflow_dlaas.tuning.progress import next_step
from mlflow_dlaas.tuning.sampling import grid_space, make_sampler, suggest
from mlflow_dlaas.tuning.spec import StudySpec, parse_spec
from mlflow_dlaas.tuning.telling import tell
from tests.tuning.test_recovery import _dead_owner

SPACE = {"batch_size": [32, 64], "intra_op_threads": [1, 2]}


def _spec(seed: int | None, n_trials: int | None = None) -> StudySpec:
    return parse_spec({"name": "grid", "frameworks": ["pytorch"], "sampler": "grid",
                       "seed": seed, "n_trials": n_trials, "search_space": SPACE,
                       "objectives": [{"metric": "accuracy", "direction": "maximize"}]})


def _load(storage: optuna.storages.BaseStorage, spec: StudySpec) -> optuna.Study:
    """The study as a rerun of ``mlflow-dlaas study`` opens it: its sampler made anew."""
    try:
        return optuna.create_study(study_name="grid", storage=storage, direction="maximize",
                                   sampler=make_sampler(spec))
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(study_name="grid", storage=storage)
        study.sampler = make_sampler(spec, len(study.get_trials(deepcopy=False)))
        return study


def _drive(study: optuna.Study, spec: StudySpec, limit: int | None = None) -> list[tuple]:
    """The driver's loop without the runs: each trial's settings, told complete."""
    measured: list[tuple] = []
    started = time.monotonic()
    while next_step(study, spec, started) == "ask":
        if limit is not None and len(measured) >= limit:
            break
        trial = study.ask()
        trial.set_user_attr(recovery.OWNER_ATTR, {})  # an owner: not an ownerless trial
        params = suggest(trial, spec)
        measured.append((params["batch_size"], params["intra_op_threads"]))
        tell(study, trial, StopSignals(), [1.0])
    return measured


def _complete_points(study: optuna.Study) -> list[tuple]:
    return sorted((t.params["batch_size"], t.params["intra_op_threads"])
                  for t in study.get_trials() if t.state == TrialState.COMPLETE)


@pytest.mark.parametrize("seed", [None, 0, 5, 17, 123])
@pytest.mark.parametrize("first", [1, 2, 3])
def test_a_resumed_grid_measures_every_point_exactly_once(seed: int | None, first: int) -> None:
    """``study --trials N`` then ``study``: with Optuna's shuffled grid re-seeded on resume,
    seed 5 measured (32, 1) twice and never (64, 2)."""
    storage = optuna.storages.InMemoryStorage()
    _drive(_load(storage, _spec(seed, n_trials=first)), _spec(seed, n_trials=first))
    study = _load(storage, _spec(seed))
    _drive(study, _spec(seed))
    assert _complete_points(study) == [(32, 1), (32, 2), (64, 1), (64, 2)]
    assert GridByValue(grid_space(_spec(seed))).measured(study.get_trials()) == 4


@pytest.mark.parametrize("seed", [None, 5, 42])
@pytest.mark.parametrize("after", [0, 1, 3])
def test_a_worker_killed_right_after_ask_leaves_its_point_to_a_retry(seed: int | None,
                                                                     after: int) -> None:
    """SIGKILL between ``ask()`` and the first parameter: the trial already says its point,
    the next run gives it up, retries that point, and measures the rest once."""
    storage = optuna.storages.InMemoryStorage()
    spec = _spec(seed)
    study = _load(storage, spec)
    _drive(study, spec, limit=after)
    killed = study.ask()  # the worker dies here: a point recorded, nothing drawn
    point = study.get_trials()[killed.number].system_attrs[POINT_ATTR]
    killed.set_user_attr(recovery.OWNER_ATTR, _dead_owner().tags())
    study = _load(storage, spec)
    recovery.recover_stale_trials(study)
    retried = _drive(study, spec)
    assert retried[0] == (point["batch_size"], point["intra_op_threads"])
    assert _complete_points(study) == [(32, 1), (32, 2), (64, 1), (64, 2)]


def test_a_trial_holding_part_of_a_point_does_not_wedge_the_study() -> None:
    """A RUNNING trial with only ``batch_size`` of a two-setting grid and no recorded point
    (a study started before points were recorded): given up, its retry queued with that
    part, and the grid completed without an error or a second measurement."""
    storage = optuna.storages.InMemoryStorage()
    spec = _spec(5)
    study = _load(storage, spec)
    planted = study.ask()
    planted.suggest_categorical("batch_size", [32, 64])
    storage.set_trial_system_attr(planted._trial_id, POINT_ATTR, None)
    planted.set_user_attr(recovery.OWNER_ATTR, _dead_owner().tags())
    for _ in range(2):  # every rerun works
        study = _load(storage, spec)
        recovery.recover_stale_trials(study)
        _drive(study, spec)
    assert _complete_points(study) == [(32, 1), (32, 2), (64, 1), (64, 2)]
    failed = [t for t in study.get_trials() if t.state == TrialState.FAIL]
    assert len(failed) == 1 and failed[0].number == planted.number


def test_two_workers_that_pick_one_point_at_once_end_on_two(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """Worker B read the trials before worker A recorded its point, so both chose (32, 1):
    B, the higher trial number, looks again and moves to the next missing point."""
    storage = optuna.storages.InMemoryStorage()
    spec = _spec(None)
    study = _load(storage, spec)
    first = study.ask()
    assert study.get_trials()[first.number].system_attrs[POINT_ATTR] == {
        "batch_size": 32, "intra_op_threads": 1}
    sampler = study.sampler
    stale = {"batch_size": 32, "intra_op_threads": 1}
    views = iter([stale])
    original = sampler._first_missing
    monkeypatch.setattr(sampler, "_first_missing",
                        lambda others, queued: next(views, None) or original(others, queued))
    second = study.ask()
    assert study.get_trials()[second.number].system_attrs[POINT_ATTR] == {
        "batch_size": 32, "intra_op_threads": 2}

