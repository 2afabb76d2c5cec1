"""A PostgreSQL tracking store that freezes mid-run: the run pays one bounded wait, keeps
what it logs in its journal (answering reads from it), and nothing is lost once the
database answers again, whether the run itself or ``resend`` delivers it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import mlflow
import pytest
from mlflow.entities import Metric, RunStatus, RunTag

from mlflow_dlaas.store import database_bounds
from mlflow_dlaas.store.journal import JOURNAL_ENV, journals_in
from mlflow_dlaas.store.journaled_sql_store import JournaledSqlStore
from mlflow_dlaas.store.journaled_store import FIRST_RETRY_S
from mlflow_dlaas.store.resend import resend
from tests.postgres import OwnPostgres

pytestmark = pytest.mark.postgres


def _store(own_postgres: OwnPostgres, tmp_path: Path) -> tuple[JournaledSqlStore, str]:
    database_bounds.bound_replies()
    uri = own_postgres.database(f"journal_{uuid.uuid4().hex[:8]}")
    return JournaledSqlStore(uri, str(tmp_path / "artifacts")), uri


def _logged(store: JournaledSqlStore, run_id: str, steps: range) -> None:
    now = int(time.time() * 1000)
    store.log_batch(run_id, [Metric("loss", float(s), now, s) for s in steps], [], [])


def test_a_frozen_database_costs_one_bounded_wait_and_loses_nothing(
        own_postgres: OwnPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(database_bounds, "NO_REPLY_WITHIN_S", 3)
    monkeypatch.setenv(JOURNAL_ENV, str(tmp_path / "journal"))
    store, _ = _store(own_postgres, tmp_path)
    run = store.create_run("0", "user", int(time.time() * 1000), [], "frozen")
    run_id = run.info.run_id
    _logged(store, run_id, range(0, 3))
    own_postgres.freeze()
    try:
        started = time.monotonic()
        _logged(store, run_id, range(3, 6))  # the one wait: the reply bound
        store.set_tag(run_id, RunTag("phase", "end"))
        store.update_run_info(run_id, RunStatus.FINISHED, int(time.time() * 1000), None)
        offline = store.get_run(run_id)  # from the journal, no wait
        waited = time.monotonic() - started
        assert waited < 3 + 2 * database_bounds.SILENT_RECHECK_S + 3, waited
        assert offline.data.metrics["loss"] == 5.0 and offline.data.tags["phase"] == "end"
        held = store._courier.deliver(within_s=60.0)  # a silent store gets one try
        assert [j.run_id for j in held] == [run_id]
        assert time.monotonic() - started < 20
    finally:
        own_postgres.thaw()
    assert resend(held[0], store._courier.tracking_uri) == 3
    saved = mlflow.MlflowClient(store._courier.tracking_uri)
    after = saved.get_run(run_id)
    assert after.info.status == "FINISHED" and after.data.tags["phase"] == "end"
    assert [m.value for m in saved.get_metric_history(run_id, "loss")] == \
        [float(s) for s in range(6)]
    assert not journals_in([tmp_path / "journal"])  # sent, so removed


def test_the_run_sends_what_it_held_once_the_database_answers_again(
        own_postgres: OwnPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(database_bounds, "NO_REPLY_WITHIN_S", 3)
    monkeypatch.setenv(JOURNAL_ENV, str(tmp_path / "journal"))
    store, uri = _store(own_postgres, tmp_path)
    run_id = store.create_run("0", "user", int(time.time() * 1000), [], "thawed").info.run_id
    own_postgres.freeze()
    _logged(store, run_id, range(0, 4))
    own_postgres.thaw()
    time.sleep(FIRST_RETRY_S)  # the back-off: then the run's next write sends all it held
    store.update_run_info(run_id, RunStatus.FINISHED, int(time.time() * 1000), None)
    assert store._courier.deliver(within_s=30.0) == []
    after = mlflow.MlflowClient(uri).get_run(run_id)
    assert after.info.status == "FINISHED" and after.data.metrics["loss"] == 3.0
