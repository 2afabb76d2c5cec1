"""Sending one journaled write, an MLflow REST request by name and JSON body, to the store a
run was logged to: a tracking server takes it as it was made; a database store (PostgreSQL)
gets the store call the server would have made for it. One journal form for both kinds."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from mlflow.entities import DatasetInput, LoggedModelInput, Metric, Param, RunTag
from mlflow.protos import service_pb2
from mlflow.store.tracking.rest_store import RestStore
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
from mlflow.utils.credentials import get_default_host_creds
from mlflow.utils.proto_json_utils import message_to_json, parse_dict

from mlflow_dlaas.store.database_bounds import is_postgres

#: A replayer: (request name, JSON body) -> None, raising where the store did not take it.
Replay = Callable[[str, "str | None"], None]


def request_replay(store_uri: str) -> Replay:
    """How the journal's writes reach the store at ``store_uri``."""
    if is_postgres(store_uri):
        store: list[SqlAlchemyStore] = []

        def into_database(api: str, body: str | None) -> None:
            if not store:  # opened at the first write: opening connects
                store.append(SqlAlchemyStore(store_uri, default_artifact_root=None))
            apply_to_database(store[0], api, body)
        return into_database
    rest = RestStore(partial(get_default_host_creds, store_uri))
    return lambda api, body: RestStore._call_endpoint(rest, getattr(service_pb2, api), body)


def request_json(api: str, **fields: Any) -> str:
    """The JSON body of the REST request ``api`` holding ``fields`` (entities as protos)."""
    return message_to_json(getattr(service_pb2, api)(**fields))


def apply_to_database(store: SqlAlchemyStore, api: str, body: str | None) -> None:
    """Make the database store call that the REST request ``api`` stands for (the store's
    own methods, never a subclass's journaling ones)."""
    message = getattr(service_pb2, api)()
    parse_dict(json.loads(body or "{}"), message)
    run_id = message.run_id or getattr(message, "run_uuid", "")
    if api == "LogBatch":
        SqlAlchemyStore.log_batch(store, run_id, [Metric.from_proto(m) for m in message.metrics],
                                  [Param.from_proto(p) for p in message.params],
                                  [RunTag.from_proto(t) for t in message.tags])
    elif api == "LogMetric":
        SqlAlchemyStore.log_metric(store, run_id, Metric(message.key, message.value,
                                                         message.timestamp, message.step))
    elif api == "LogParam":
        SqlAlchemyStore.log_param(store, run_id, Param(message.key, message.value))
    elif api == "SetTag":
        SqlAlchemyStore.set_tag(store, run_id, RunTag(message.key, message.value))
    elif api == "DeleteTag":
        SqlAlchemyStore.delete_tag(store, run_id, message.key)
    elif api == "UpdateRun":
        SqlAlchemyStore.update_run_info(
            store, run_id, message.status if message.HasField("status") else None,
            message.end_time if message.HasField("end_time") else None,
            message.run_name or None)
    elif api == "LogInputs":
        SqlAlchemyStore.log_inputs(store, run_id,
                                   [DatasetInput.from_proto(d) for d in message.datasets],
                                   [LoggedModelInput.from_proto(m) for m in message.models])
    else:
        raise ValueError(f"a journal holds a write this version cannot replay: {api}")
