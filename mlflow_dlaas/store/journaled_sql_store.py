"""MLflow's database tracking store (PostgreSQL) with each write to a run journaled first,
like a tracking server's (:mod:`~mlflow_dlaas.store.journaled_store`): a database that
freezes or dies costs a run one bounded wait (:mod:`~mlflow_dlaas.store.database_bounds`),
then its writes are held in its journal, sent once the database answers again or by
``mlflow-dlaas resend``, and ``get_run`` is answered from what was logged meanwhile.

Each write is journaled in its REST form (the request a tracking server would have been
sent), so one journal and one ``resend`` serve both kinds of store. Not journaled, as for a
server: writes that return what the store makes (a run, an experiment, a logged model).
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from mlflow.entities import DatasetInput, LoggedModelInput, Metric, Param, Run, RunTag
from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
from mlflow.tracking._tracking_service import utils as tracking_utils

from mlflow_dlaas.store.journaled_store import courier_for, install_at_exit_report
from mlflow_dlaas.store.request_replay import apply_to_database, request_json


class JournaledSqlStore(SqlAlchemyStore):
    """A database tracking store whose run writes go through the run's journal."""

    def __init__(self, db_uri: str, default_artifact_root: str | None) -> None:
        super().__init__(db_uri, default_artifact_root)
        self._courier = courier_for(db_uri)
        self._courier.replay = partial(apply_to_database, self)

    def _journaled(self, run_id: str, api: str, **fields: Any) -> None:
        body = request_json(api, run_id=run_id, **fields)
        self._courier.submit(run_id, "rest", {"api": api, "body": body},
                             partial(apply_to_database, self, api, body))

    def log_batch(self, run_id: str, metrics: list[Metric], params: list[Param],
                  tags: list[RunTag]) -> None:
        self._journaled(run_id, "LogBatch", metrics=[m.to_proto() for m in metrics],
                        params=[p.to_proto() for p in params], tags=[t.to_proto() for t in tags])

    def log_metric(self, run_id: str, metric: Metric) -> None:
        self.log_batch(run_id, [metric], [], [])

    def log_param(self, run_id: str, param: Param) -> None:
        self.log_batch(run_id, [], [param], [])

    def set_tag(self, run_id: str, tag: RunTag) -> None:
        self._journaled(run_id, "SetTag", key=tag.key, value=tag.value)

    def delete_tag(self, run_id: str, key: str) -> None:
        self._journaled(run_id, "DeleteTag", key=key)

    def update_run_info(self, run_id: str, run_status: Any, end_time: int | None,
                        run_name: str | None) -> Any:
        fields: dict[str, Any] = {"run_name": run_name} if run_name else {}
        if run_status is not None:
            fields["status"] = run_status
        if end_time is not None:
            fields["end_time"] = end_time
        self._journaled(run_id, "UpdateRun", **fields)
        view = self._courier.offline_view(run_id)
        return None if view is None else view.info

    def log_inputs(self, run_id: str, datasets: list[DatasetInput] | None = None,
                   models: list[LoggedModelInput] | None = None) -> None:
        self._journaled(run_id, "LogInputs", datasets=[d.to_proto() for d in datasets or []],
                        models=[m.to_proto() for m in models or []])

    def create_run(self, *args: Any, **kwargs: Any) -> Run:
        run = super().create_run(*args, **kwargs)
        self._courier.saw(run)
        return run

    def get_run(self, run_id: str) -> Run:
        return self._courier.read_run(run_id, partial(SqlAlchemyStore.get_run, self, run_id))


def _build(store_uri: str, artifact_uri: str | None = None, **_: Any) -> JournaledSqlStore:
    """MLflow's own builder's choices (``_get_sqlalchemy_store``), our store."""
    default_root = os.environ.get(tracking_utils._SERVER_ARTIFACT_ROOT_ENV_VAR,
                                  DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH)
    return JournaledSqlStore(store_uri, artifact_uri or default_root)


def journal_runs_written_to_database(store_uri: str) -> None:
    """In this process, journal every run write to the PostgreSQL tracking store
    ``store_uri`` (its scheme, with any driver suffix)."""
    tracking_utils._tracking_store_registry.register(
        urlsplit(store_uri).scheme.split("+", 1)[0], _build)
    type(tracking_utils._tracking_store_registry)._get_store_with_resolved_uri.cache_clear()
    install_at_exit_report()
