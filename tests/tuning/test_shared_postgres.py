"""Many workers, one study: an MLflow server on PostgreSQL, Optuna's RDB storage on PostgreSQL."""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import mlflow
import optuna
import pytest
from optuna.trial import TrialState

from mlflow_dlaas.tuning.recovery import REASON_ATTR
from tests.postgres import fresh_databases
from tests.tuning.servers import mlflow_server
from tests.tuning.studies import CHEAP_FIXED, study_cli, write_spec

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
WORKERS = 3
N_TRIALS = 4


@pytest.fixture
def databases() -> Iterator[tuple[str, ...]]:
    """Two fresh databases: MLflow's and Optuna's."""
    with fresh_databases("mlflow", "optuna") as urls:
        yield urls


def test_three_workers_share_one_study_and_one_parent(
    cli_path: str, databases: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the trials train with PyTorch (extra: torch)")
    mlflow_db, optuna_db = databases
    name = f"shared-{uuid.uuid4().hex[:6]}"
    spec = write_spec(tmp_path, name=name, n_trials=N_TRIALS,
                      search_space={"batch_size": [8, 16, 32, 64]})
    with mlflow_server(mlflow_db, tmp_path / "artifacts") as url:
        env = dict(os.environ, MLFLOW_TRACKING_URI=url)
        workers = [study_cli(cli_path, spec, "--storage", optuna_db, env=env, wait=False)
                   for _ in range(WORKERS)]
        outputs = [w.communicate(timeout=900)[0] for w in workers]
        for worker, output in zip(workers, outputs, strict=True):
            assert worker.returncode == 0, output[-3000:]

        study = optuna.load_study(study_name=name, storage=optuna_db)
        trials = study.get_trials()
        # each worker checks the count before asking, so at most WORKERS - 1 extra trials
        assert N_TRIALS <= len(trials) <= N_TRIALS + WORKERS - 1
        assert [t.number for t in trials] == list(range(len(trials)))
        assert all(t.state == TrialState.COMPLETE for t in trials), [
            (t.number, t.state.name, t.user_attrs.get(REASON_ATTR, "NO REASON"), t.system_attrs)
            for t in trials] + [o[-2000:] for o in outputs]

        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        client = mlflow.MlflowClient(url)
        experiment = client.get_experiment_by_name(name)
        runs = client.search_runs([experiment.experiment_id], max_results=1000)
        parents = [r for r in runs if r.data.tags.get("dlaas.role") == "study"]
        children = [r for r in runs if r.data.tags.get("dlaas.role") == "trial"]
        assert len(parents) == 1
        assert len(children) == len(trials)  # none lost, none duplicated
        assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
        assert sorted(int(c.data.tags["dlaas.trial_number"]) for c in children) == [
            t.number for t in trials]
        assert {c.info.status for c in children} == {"FINISHED"}
        workers_seen = {t.user_attrs["dlaas_owner"]["dlaas.owner_pid"] for t in trials}
        assert len(workers_seen) >= 2  # the work was really shared


def test_a_trial_prunes_through_a_storage_url_whose_password_reaches_no_run(
    cli_path: str, tracking: str, databases: tuple[str, str], tmp_path: Path
) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the trials train with PyTorch (extra: torch)")
    _, optuna_db = databases
    secret = f"pw-{uuid.uuid4().hex[:12]}"  # the service trusts local users: any password
    scheme, rest = optuna_db.split("://", 1)
    user, host = rest.split("@", 1)
    storage = f"{scheme}://{user}:{secret}@{host}"
    name = f"pruned-{uuid.uuid4().hex[:6]}"
    spec = write_spec(tmp_path, name=name, n_trials=1, pruner="median",
                      fixed={**CHEAP_FIXED, "max_steps": 0, "epochs": 2})
    out = study_cli(cli_path, spec, "--storage", storage)
    assert out.returncode == 0, out.stderr[-3000:]
    (trial,) = optuna.load_study(study_name=name, storage=optuna_db).trials
    assert sorted(trial.intermediate_values) == [1, 2]  # reported from inside the trial
    assert secret not in out.stdout + out.stderr
    client = mlflow.MlflowClient()
    for run in client.search_runs([client.get_experiment_by_name(name).experiment_id]):
        assert secret not in str(run.data.params) + str(run.data.tags)
        local = client.download_artifacts(run.info.run_id, "", str(tmp_path / run.info.run_id))
        for path in Path(local).rglob("*"):
            if path.is_file():
                assert secret not in path.read_text(errors="replace"), path


def test_three_processes_open_a_fresh_postgres_tracking_database_at_once(
    databases: tuple[str, str], tmp_path: Path
) -> None:
    """The first use of a new PostgreSQL tracking store is serialised (an advisory lock):
    three processes that open it together all succeed, none with a UniqueViolation."""
    import subprocess
    import sys

    mlflow_db, _ = databases
    code = ("from mlflow_dlaas.store.experiments import ensure_experiment\n"
            "from mlflow_dlaas.store.tracking import configure_tracking\n"
            "configure_tracking(announce=False)\nprint(ensure_experiment('fresh-pg'))\n")
    env = dict(os.environ, MLFLOW_TRACKING_URI=mlflow_db)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    done = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert [code for code, _, _ in done] == [0, 0, 0], [err[-2000:] for _, _, err in done]
    assert len({out.strip() for _, out, _ in done}) == 1  # one experiment, found by all
