"""Several workers on one machine (journal file) and a Redis journal, with real trials."""

from __future__ import annotations

import importlib.util
import os
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.tuning.studies import study_cli, study_runs, write_spec

pytestmark = pytest.mark.slow
REDIS_URL = os.environ.get("DLAAS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture(autouse=True)
def _needs_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the study tests train with PyTorch (extra: torch)")


def test_two_workers_share_a_journal_file(cli_path: str, tracking: str, tmp_path: Path) -> None:
    name = f"journal-{uuid.uuid4().hex[:6]}"
    journal = tmp_path / "study.log"
    spec = write_spec(tmp_path, name=name, n_trials=3, search_space={"batch_size": [16, 32]})
    workers = [study_cli(cli_path, spec, "--storage", f"journal:{journal}", wait=False)
               for _ in range(2)]
    outputs = [w.communicate(timeout=900)[0] for w in workers]
    for worker, output in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, output[-3000:]
    assert any("runs on this machine beside trial" in output for output in outputs), outputs
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal)))
    trials = optuna.load_study(study_name=name, storage=storage).get_trials()
    assert 3 <= len(trials) <= 4 and all(t.state == TrialState.COMPLETE for t in trials)
    (parent,), children = study_runs(name)
    assert len(children) == len(trials)
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}


def test_a_redis_journal(cli_path: str, tracking: str, tmp_path: Path) -> None:
    redis = pytest.importorskip("redis", reason="redis client missing (extra: redis)")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.exceptions.ConnectionError as e:
        pytest.skip(f"no Redis answers at {REDIS_URL} ({e}); set DLAAS_TEST_REDIS_URL")
    name = f"redis-{uuid.uuid4().hex[:6]}"
    spec = write_spec(tmp_path, name=name, n_trials=1)
    out = study_cli(cli_path, spec, "--storage", REDIS_URL)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Redis journal redis://127.0.0.1:6379/0" in out.stderr
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalRedisBackend(REDIS_URL))
    (trial,) = optuna.load_study(study_name=name, storage=storage).get_trials()
    assert trial.state == TrialState.COMPLETE
    (parent,), (child,) = study_runs(name)
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id


@pytest.mark.parametrize(("target", "said"), [
    ("/dev/null", "not a regular file"), ("{tmp}", "not a regular file"),
    ("/etc/passwd", "not an Optuna journal file"),
    ("{tmp}/no/such/folder/j.log", "does not exist; create it"),
])
def test_a_journal_path_that_cannot_be_one_is_one_line_and_exit_2(
        tmp_path: Path, target: str, said: str) -> None:
    """`--storage journal:/dev/null` (fsync EINVAL) and a file not Optuna's printed
    tracebacks."""
    from mlflow_dlaas.errors import ConfigError
    from mlflow_dlaas.optuna_access.storage import make_storage

    path = target.format(tmp=tmp_path)
    with pytest.raises(ConfigError, match=said) as caught:
        make_storage(f"journal:{path}")
    assert caught.value.exit_code == 2 and "***" not in str(caught.value)
