"""A resumed study whose spec no longer fits what the study holds is refused in one line,
before any trial: the storage keeps one distribution per parameter."""

from __future__ import annotations

import uuid
from pathlib import Path

import optuna

from mlflow_dlaas.tuning.parent_run import PARENT_ATTR
from tests.tuning.studies import study_cli, write_spec


def test_a_search_space_changed_since_the_study_began_is_one_line_before_any_trial(
        cli_path: str, tracking: str, tmp_path: Path) -> None:
    """A parameter whose kind changed on resume (choices then, an int range now) failed
    every trial with Optuna's "Cannot set different distribution kind" traceback."""
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    name = f"changed-{uuid.uuid4().hex[:6]}"
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize")
    study.add_trial(optuna.trial.create_trial(
        params={"batch_size": 16}, value=0.5,
        distributions={"batch_size": optuna.distributions.CategoricalDistribution([16, 32])}))
    spec = write_spec(tmp_path, name=name, n_trials=2,
                      search_space={"batch_size": {"type": "int", "low": 8, "high": 64}})
    out = study_cli(cli_path, spec, "--storage", storage, timeout=300)
    assert out.returncode == 2, out.stderr[-3000:]
    assert ("began with another search space, which Optuna keeps per parameter "
            "(batch_size: choices [16, 32] then, int 8..64 now)") in out.stderr
    assert "Traceback" not in out.stderr
    assert len(optuna.load_study(study_name=name, storage=storage).trials) == 1


def test_a_study_whose_parent_run_the_tracking_store_lacks_is_one_line(
        cli_path: str, tracking: str, tmp_path: Path) -> None:
    """mlflow.db deleted with optuna.db kept: every rerun failed 'Run with id=... not
    found' with a traceback."""
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    name = f"orphaned-{uuid.uuid4().hex[:6]}"
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize")
    study.set_user_attr(PARENT_ATTR, "0" * 32)
    spec = write_spec(tmp_path, name=name, n_trials=1)
    out = study_cli(cli_path, spec, "--storage", storage, timeout=300)
    assert out.returncode == 1, out.stderr[-3000:]
    assert f"study {name!r} records its parent run {'0' * 32}, which the tracking store" \
        in out.stderr
    assert "Traceback" not in out.stderr
    assert len(optuna.load_study(study_name=name, storage=storage).trials) == 0
