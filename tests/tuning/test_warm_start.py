"""`study --warm-start STUDY`: the earlier trials added where this host's fingerprint
matches, its best points queued first where it does not; a bad name refused before
anything is made."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mlflow
import optuna
import pytest
from optuna.trial import TrialState

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.tuning.grid import GridByValue
from mlflow_dlaas.tuning.sampling import distributions, grid_space
from mlflow_dlaas.tuning.spec import load_spec
from mlflow_dlaas.tuning.warm_start import (
    FINGERPRINT_ATTR,
    WARM_FROM_ATTR,
    earlier_study,
    record_fingerprint,
    warm_start,
)
from tests.tuning.studies import (
    needs_torch,  # noqa: F401 - the fixture, used by name
    study_cli,
    study_name,
    study_runs,
    write_spec,
)

TIME = [{"metric": "train_time_seconds", "direction": "minimize"}]


def _studies(tmp_path: Path, fingerprint: str | None = None):
    spec = load_spec(write_spec(tmp_path, name="new", sampler="grid", objectives=TIME,
                                search_space={"batch_size": [16, 32, 64]}))
    storage = optuna.storages.InMemoryStorage()
    earlier = optuna.create_study(study_name="old", storage=storage, direction="minimize")
    record_fingerprint(earlier)
    if fingerprint is not None:
        earlier.set_user_attr(FINGERPRINT_ATTR, fingerprint)
    for batch, seconds in ((16, 3.0), (32, 1.0), (64, 2.0)):
        earlier.add_trial(optuna.trial.create_trial(
            params={"batch_size": batch}, distributions=distributions(spec), value=seconds))
    new = optuna.create_study(study_name="new", storage=storage, direction="minimize")
    record_fingerprint(new)
    spec = dataclasses.replace(spec, warm_start="old")
    return spec, storage, new


def test_a_matching_fingerprint_adds_the_earlier_trials_with_their_values(
        tmp_path: Path) -> None:
    spec, storage, new = _studies(tmp_path)
    said = warm_start(new, spec, earlier_study(storage, spec))
    assert "3 complete trials of 'old' added" in said
    trials = new.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert {t.params["batch_size"]: t.value for t in trials} == {16: 3.0, 32: 1.0, 64: 2.0}
    assert trials[1].user_attrs[WARM_FROM_ATTR] == "old trial 1"
    assert GridByValue(grid_space(spec)).missing(trials) == []  # nothing measured again


def test_another_fingerprint_queues_the_earlier_best_points_first(tmp_path: Path) -> None:
    spec, storage, new = _studies(tmp_path, fingerprint="intel-xeon-8c-abcdef")
    said = warm_start(new, spec, earlier_study(storage, spec))
    assert "ran on another kind of host (intel-xeon-8c-abcdef" in said
    queued = new.get_trials()
    assert [t.state for t in queued] == [TrialState.WAITING] * 3
    assert [t.system_attrs["fixed_params"]["batch_size"] for t in queued] == [32, 64, 16]


def test_a_missing_study_or_other_objectives_are_refused(tmp_path: Path) -> None:
    spec, storage, _ = _studies(tmp_path)
    with pytest.raises(ConfigError, match="no such study"):
        earlier_study(storage, dataclasses.replace(spec, warm_start="nope"))
    optuna.create_study(study_name="other", storage=storage, direction="maximize")
    with pytest.raises(ConfigError, match="same objectives"):
        earlier_study(storage, dataclasses.replace(spec, warm_start="other"))


@pytest.mark.slow
@pytest.mark.usefixtures("needs_torch")
def test_a_warm_started_study_on_the_same_host_measures_nothing_again(
        cli_path: str, tracking: str, tmp_path: Path) -> None:
    first, second = study_name(), study_name()
    space = {"batch_size": [16, 32]}
    out = study_cli(cli_path, write_spec(tmp_path, name=first, sampler="grid",
                                         search_space=space))
    assert out.returncode == 0, out.stderr[-3000:]
    spec = write_spec(tmp_path, name=second, sampler="grid", search_space=space)
    missing = study_cli(cli_path, spec, "--warm-start", "no-such-study")
    assert missing.returncode == 2 and "no such study" in missing.stderr, missing.stderr
    assert mlflow.MlflowClient().get_experiment_by_name(second) is None  # nothing made
    out = study_cli(cli_path, spec, "--warm-start", first)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"2 complete trials of '{first}' added" in out.stderr, out.stderr[-3000:]
    assert "grid: 2 of 2 points measured" in out.stderr
    (parent,), children = study_runs(second)
    assert parent.info.status == "FINISHED" and children == []
