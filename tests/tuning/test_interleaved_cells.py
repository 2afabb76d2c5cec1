"""A study's cells measured in interleaved rounds (replicate 0 of each cell, then replicate 1
of each, in a seeded order), and a stop in the middle of a round given up and resumed."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import SimpleNamespace

import mlflow
import optuna
import pytest
from optuna.trial import TrialState

from mlflow_dlaas.tuning.interleaving import MAX_INTERLEAVED, batch_size, round_order
from mlflow_dlaas.tuning.spec import load_spec
from tests.tuning.studies import (
    needs_torch,  # noqa: F401 - the fixture, used by name
    study_cli,
    study_name,
    study_runs,
    write_spec,
)


def _spec(tmp_path: Path, **fields: object):
    return load_spec(write_spec(tmp_path, name="s", **fields))


def test_grids_and_counted_random_searches_interleave_learning_samplers_do_not(
        tmp_path: Path) -> None:
    space = {"batch_size": [16, 32]}
    assert batch_size(_spec(tmp_path, sampler="grid", replicates=3,
                            search_space=space)) == MAX_INTERLEAVED
    assert batch_size(_spec(tmp_path, sampler="random", replicates=3, n_trials=4,
                            search_space=space)) == MAX_INTERLEAVED
    assert batch_size(_spec(tmp_path, sampler="tpe", replicates=3, n_trials=4,
                            search_space=space)) == 1
    assert batch_size(_spec(tmp_path, sampler="grid", replicates=1, search_space=space)) == 1


def test_each_round_has_its_own_seeded_order() -> None:
    cells = [SimpleNamespace(number=n) for n in range(6)]
    orders = [[c.number for c in round_order(cells, r, seed=3)] for r in range(4)]
    assert all(sorted(o) == list(range(6)) for o in orders)
    assert len({tuple(o) for o in orders}) > 1  # not one order for every round
    assert orders == [[c.number for c in round_order(cells, r, seed=3)] for r in range(4)]
    assert orders != [[c.number for c in round_order(cells, r, seed=4)] for r in range(4)]


def _children_by_start(name: str) -> list[mlflow.entities.Run]:
    return sorted(study_runs(name)[1], key=lambda r: r.info.start_time)


@pytest.mark.slow
@pytest.mark.usefixtures("needs_torch")
def test_a_grid_study_runs_its_cells_in_rounds_and_resumes_after_a_stop_mid_round(
        cli_path: str, tracking: str, tmp_path: Path) -> None:
    name = study_name()
    spec = write_spec(tmp_path, name=name, sampler="grid", replicates=2, seed=5,
                      search_space={"batch_size": [16, 32]})
    driver = study_cli(cli_path, spec, wait=False)
    deadline = time.monotonic() + 300
    client = mlflow.MlflowClient()
    while time.monotonic() < deadline and (client.get_experiment_by_name(name) is None
                                           or len(study_runs(name)[1]) < 1):
        time.sleep(0.3)
    driver.send_signal(signal.SIGTERM)  # in the first round: two trials held, one under way
    output = driver.communicate(timeout=60)[0]
    assert driver.returncode == 128 + signal.SIGTERM, output[-3000:]
    storage = f"sqlite:///{Path.cwd() / 'optuna.db'}"
    trials = optuna.load_study(study_name=name, storage=storage).trials
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    assert all(r.info.status != "RUNNING" for r in study_runs(name)[1])

    out = study_cli(cli_path, spec, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "grid: 2 of 2 points measured" in out.stderr, out.stderr[-3000:]
    resumed = [r for r in _children_by_start(name)
               if not r.data.tags.get("dlaas.orphaned") and r.info.status == "FINISHED"]
    rounds = [r.data.tags["dlaas.replicate"] for r in resumed]
    assert rounds == ["0", "0", "1", "1"], rounds  # every cell once a round
    first, second = resumed[:2], resumed[2:]
    assert max(r.info.end_time for r in first) <= min(r.info.start_time for r in second)
    assert sorted(r.data.params["batch_size"] for r in first) == ["16", "32"]
    trials = optuna.load_study(study_name=name, storage=storage).trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert sorted(t.params["batch_size"] for t in complete) == [16, 32]
    (parent,), _ = study_runs(name)
    assert parent.info.status == "FINISHED"
