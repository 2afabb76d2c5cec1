"""MLflow's side of the run journal (:mod:`mlflow_dlaas.store.journal`): a tracking server's
REST store and artifact repository whose writes are journaled first, sent in order, and held
while the server does not answer; and the bounds on every request to it.

Where a run's writes go through: every REST call of MLflow's client passes through
``RestStore._call_endpoint`` and every upload to the server's artifact proxy through
``HttpArtifactRepository.log_artifact``; we subclass both and register them for the
``http``/``https`` and ``mlflow-artifacts`` schemes in our own processes. MLflow 3.17 offers
no public hook for this (its store plug-ins need a scheme of their own, which would change
the URIs users give), so these private names are used here and only here.

Not journaled: writes that return what the server makes (creating a run, an experiment, a
logged model), artifact stores other than the server's proxy (S3 and the like, written
directly), and processes other than ours (the ``mlflow run`` CLI that waits for the entry).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from mlflow.entities import Metric, Param, Run, RunData, RunTag
from mlflow.store.artifact import artifact_repository_registry
from mlflow.store.artifact.http_artifact_repo import HttpArtifactRepository
from mlflow.store.artifact.mlflow_artifacts_repo import MlflowArtifactsRepository
from mlflow.store.tracking.rest_store import RestStore
from mlflow.tracking._tracking_service import utils as tracking_utils
from mlflow.utils.credentials import get_default_host_creds

from mlflow_dlaas.console_log import console
from mlflow_dlaas.redaction import redact_text, redact_uri
from mlflow_dlaas.store.database_bounds import stalled_database_reason
from mlflow_dlaas.store.journal import Operation, RunJournal
from mlflow_dlaas.store.request_replay import request_replay
from mlflow_dlaas.store.store_uri import is_unreachable, store_noun, went_silent

log = console(__name__)

T = TypeVar("T")
#: The REST calls that write to one run, by MLflow's request names.
WRITE_APIS = frozenset({"LogBatch", "LogMetric", "LogParam", "SetTag", "DeleteTag",
                        "UpdateRun", "LogInputs"})
#: Bounds on every request to a tracking server from our processes, unless the user set them
#: (MLflow's own defaults retry for minutes): 20 s per attempt, 3 attempts, 1-2 s between.
HTTP_BOUNDS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "20", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
               "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
#: While the server does not answer, the next try waits this long, doubling up to the cap.
FIRST_RETRY_S, MAX_RETRY_S = 2.0, 30.0
#: How long the end of a run keeps trying to deliver what is held, before it leaves the
#: journal and says how to resend it.
DELIVER_WITHIN_ENV = "MLFLOW_DLAAS_DELIVER_WITHIN_S"
DELIVER_WITHIN_S = 60.0


class _RunView:
    """What this process logged to one run, to answer ``get_run`` while the server is away."""

    def __init__(self) -> None:
        self.base: Run | None = None
        self.params: dict[str, str] = {}
        self.tags: dict[str, str] = {}
        self.metrics: dict[str, Metric] = {}

    def apply(self, api: str, body: dict[str, Any]) -> None:
        for m in body.get("metrics", []) if api == "LogBatch" else \
                [body] if api == "LogMetric" else []:
            metric = Metric(m["key"], float(m.get("value", 0.0)), int(m.get("timestamp", 0)),
                            int(m.get("step", 0)))
            held = self.metrics.get(metric.key)
            if held is None or (metric.step, metric.timestamp) >= (held.step, held.timestamp):
                self.metrics[metric.key] = metric
        for p in body.get("params", []) if api == "LogBatch" else \
                [body] if api == "LogParam" else []:
            self.params[p["key"]] = p.get("value", "")
        for t in body.get("tags", []) if api == "LogBatch" else \
                [body] if api == "SetTag" else []:
            self.tags[t["key"]] = t.get("value", "")

    def run(self) -> Run | None:
        if self.base is None:
            return None
        data = self.base.data
        metrics = {**{k: Metric(k, v, 0, 0) for k, v in data.metrics.items()}, **self.metrics}
        return Run(self.base.info, RunData(
            metrics=list(metrics.values()),
            params=[Param(k, v) for k, v in {**data.params, **self.params}.items()],
            tags=[RunTag(k, v) for k, v in {**data.tags, **self.tags}.items()]))


#: Refusals of a held write that replaying can never change (a param logged since with
#: another value): the write is skipped with a line; any other refusal keeps it held.
FINAL_REFUSALS = frozenset({"INVALID_PARAMETER_VALUE", "RESOURCE_ALREADY_EXISTS",
                            "BAD_REQUEST", "MALFORMED_REQUEST"})
#: A run's journal is emptied of what was sent every this many writes.
FORGET_EVERY = 200


def finally_refused(error: BaseException) -> bool:
    """Whether no later try can send the write: the server refused it for what it holds,
    or it cannot even be encoded here (a hand-edited journal's NaN: no request was made)."""
    import requests

    if getattr(error, "error_code", None) in FINAL_REFUSALS:
        return True
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, requests.exceptions.JSONDecodeError):
            return False  # the server's answer was not JSON (a proxy's page): try again
        if isinstance(current, (requests.exceptions.InvalidJSONError, json.JSONDecodeError)):
            return True  # the held body itself cannot be sent: no request was made
        current = current.__cause__ or current.__context__
    return False


class Courier:
    """Sends one server's journaled writes in order, per run; holds them while the server
    does not answer and retries with a bounded back-off."""

    def __init__(self, tracking_uri: str) -> None:
        self.tracking_uri = tracking_uri
        #: sends one journaled request (its name and JSON body) to the store
        self.replay = request_replay(tracking_uri)
        self._lock = threading.RLock()  # one send at a time, in order
        self._state = threading.Lock()  # the dicts below
        self._journals: dict[str, RunJournal] = {}
        self._views: dict[str, _RunView] = {}
        self._held: dict[str, int] = {}  # run id -> the highest held write's number
        self._retry_at = 0.0
        self._delay_s = FIRST_RETRY_S
        self._away_since: float | None = None
        self._unjournaled: str | None = None
        self._silent = False  # the last failure was a wait without a reply, not a refusal
        #: how many times the server stopped answering (each outage once)
        self.outages = 0

    def journal(self, run_id: str) -> RunJournal:
        with self._state:
            if run_id not in self._journals:
                self._journals[run_id] = RunJournal.open(run_id, self.tracking_uri)
            return self._journals[run_id]

    def submit(self, run_id: str, kind: str, fields: dict[str, Any],
               send_now: Callable[[], T]) -> T | None:
        """Journal one write of ``run_id``, then send it (after any the run holds); None
        where it is held for later. Only the main thread waits for the server; a helper
        thread (the monitor's sampling) holds its write when the main thread is sending or
        the server is away, and it goes out with the run's next write."""
        try:
            journal = self.journal(run_id)
            op = journal.append(kind, **fields)
        except OSError as e:  # a full or unwritable journal disk: send without it
            if self._unjournaled is None:
                self._unjournaled = str(e)
                log.info(f"mlflow-dlaas: cannot write the run's journal ({e}); its writes go to "
                         "the tracking server unjournaled")
            return send_now()
        if kind == "rest":
            with self._state:
                self._views.setdefault(run_id, _RunView()).apply(
                    fields["api"], json.loads(fields["body"] or "{}"))
        main = threading.current_thread() is threading.main_thread()
        if not self._lock.acquire(blocking=main):
            self._hold(journal, op)
            return None
        try:
            if self.away() or (not main and self._away_since is not None):
                self._hold(journal, op)
                return None
            if run_id in self._held:
                if not self._flush(journal, before=op.seq):
                    self._hold(journal, op)
                    return None
                with self._state:  # all before this one is sent, unless held meanwhile
                    if self._held.get(run_id, 0) < op.seq:
                        self._held.pop(run_id, None)
            try:
                result = send_now()
            except Exception as e:
                if not is_unreachable(e):
                    journal.mark_sent(op.seq)  # answered: the server refused it
                    raise
                self._went_away(e)
                self._hold(journal, op)
                return None
            journal.mark_sent(op.seq)
            self._came_back()
            if op.seq % FORGET_EVERY == 0 and run_id not in self._held:
                journal.forget_delivered()
            return result
        finally:
            self._lock.release()

    def saw(self, run: Run) -> None:
        """The server's copy of a run, the base of :meth:`offline_view`."""
        with self._state:
            self._views.setdefault(run.info.run_id, _RunView()).base = run

    def away(self) -> bool:
        """Whether the server did not answer and it is not yet time to try again."""
        return self._away_since is not None and time.monotonic() < self._retry_at

    def read_run(self, run_id: str, read: Callable[[], Run]) -> Run:
        """The run as the store has it (``read``), or, while the store does not answer, as
        last read plus what this process logged to it since."""
        if self.away():  # no request while it is known not to answer
            view = self.offline_view(run_id)
            if view is not None:
                return view
        try:
            run = read()
        except Exception as e:
            view = self.offline_view(run_id) if is_unreachable(e) else None
            if view is None:
                raise
            return view
        self.saw(run)
        return run

    def offline_view(self, run_id: str) -> Run | None:
        """The run as last read plus what this process logged to it since, or None."""
        with self._state:
            view = self._views.get(run_id)
            return None if view is None else view.run()

    def deliver(self, within_s: float) -> list[RunJournal]:
        """Try to send everything held (at least once, then for at most ``within_s``); the
        journals still holding something. Delivered journals are removed; none is followed
        after this. A server that went silent (accepting, never answering: frozen) gets at
        most one try, none while its back-off runs: each try would cost its whole timeout,
        and the journal keeps what it did not take."""
        deadline = time.monotonic() + within_s
        with self._state:
            journals = list(self._journals.values())
        held = []
        for journal in journals:  # what a helper thread held is in the journal, too
            tried = self._silent and self.away()
            while journal.pending():
                wait = max(self._retry_at - time.monotonic(), 0.0)
                if tried and (self._silent or time.monotonic() + wait > deadline):
                    held.append(journal)
                    break
                time.sleep(min(wait, max(deadline - time.monotonic(), 0.0)))
                with self._lock:
                    self._flush(journal, force=not tried)
                tried = True
        with self._lock, self._state:
            for journal in journals:
                self._journals.pop(journal.run_id, None)
                if journal not in held:
                    self._held.pop(journal.run_id, None)
                    journal.remove_if_delivered()
        return held

    def _hold(self, journal: RunJournal, op: Operation) -> None:
        with self._state:
            self._held[journal.run_id] = max(self._held.get(journal.run_id, 0), op.seq)
        if op.kind == "artifacts" and not journal.copy_of(op.seq).exists():
            journal.copy_artifacts(op.seq, Path(op.fields["local"]))  # the caller's may go

    def _flush(self, journal: RunJournal, before: int | None = None,
               force: bool = False) -> bool:
        """Send the run's held writes in order (those before ``before``); False when the
        server still does not take them (or it is not time to try yet, unless ``force``)."""
        if not force and time.monotonic() < self._retry_at:
            return False
        for op in journal.pending():
            if before is not None and op.seq >= before:
                break
            try:
                self.send(journal, op)
            except Exception as e:
                if not finally_refused(e):  # away, or refusing for now (auth, a proxy)
                    self._went_away(e)
                    return False
                log.info(f"mlflow-dlaas: the tracking server refused a held write of run "
                         f"{journal.run_id} ({redact_text(str(e))[:300]}); skipped")
            journal.mark_sent(op.seq)
        self._came_back()
        return True

    def send(self, journal: RunJournal, op: Operation) -> None:
        if op.kind == "rest":
            self.replay(op.fields["api"], op.fields["body"])
            return
        copy = journal.copy_of(op.seq)
        local = copy if copy.exists() else Path(op.fields["local"])
        if copy.exists() and op.fields["file"]:
            local = next(copy.iterdir())  # a file is kept in a folder of its own
        repo = MlflowArtifactsRepository(op.fields["uri"], tracking_uri=self.tracking_uri)
        if local.is_dir():
            repo.log_artifacts(str(local), op.fields["path"])
        else:
            repo.log_artifact(str(local), op.fields["path"])

    def _went_away(self, error: BaseException) -> None:
        now = time.monotonic()
        self._silent = went_silent(error)
        if self._away_since is None:
            self._away_since = now
            self.outages += 1
            unreachable = is_unreachable(error)
            what = (unreachable and stalled_database_reason(error)) or "does not answer (" + (
                type(error).__name__ if unreachable else redact_text(str(error))[:200]) + ")"
            log.info(f"mlflow-dlaas: {store_noun(self.tracking_uri)} at "
                     f"{redact_uri(self.tracking_uri)} {what}; the run goes on and keeps what "
                     "it logs in its journal until it is back")
        self._retry_at = now + self._delay_s
        self._delay_s = min(self._delay_s * 2, MAX_RETRY_S)

    def _came_back(self) -> None:
        if self._away_since is not None:
            away_s = time.monotonic() - self._away_since
            log.info(f"mlflow-dlaas: {store_noun(self.tracking_uri)} at "
                     f"{redact_uri(self.tracking_uri)} answers again after {away_s:.0f} s; "
                     "what was held is sent")
        self._away_since, self._retry_at, self._delay_s = None, 0.0, FIRST_RETRY_S
        self._silent = False


_COURIERS: dict[str, Courier] = {}
_COURIERS_LOCK = threading.Lock()


def outages_seen(tracking_uri: str) -> int:
    """How many times this process found the tracking server at ``tracking_uri`` not
    answering (0 where it never wrote to it through the journal)."""
    with _COURIERS_LOCK:
        courier = _COURIERS.get(tracking_uri)
    return 0 if courier is None else courier.outages


def courier_for(tracking_uri: str) -> Courier:
    with _COURIERS_LOCK:
        if tracking_uri not in _COURIERS:
            _COURIERS[tracking_uri] = Courier(tracking_uri)
        return _COURIERS[tracking_uri]


def _run_id_of(json_body: str | None) -> str | None:
    if not json_body:
        return None
    body = json.loads(json_body)
    return body.get("run_id") or body.get("run_uuid")


class JournaledRestStore(RestStore):
    """MLflow's REST store, with each write to a run journaled first and held while the
    server does not answer, and ``get_run`` answered from what was logged meanwhile."""

    def __init__(self, tracking_uri: str) -> None:
        super().__init__(partial(get_default_host_creds, tracking_uri))
        self._courier = courier_for(tracking_uri)

    def _call_endpoint(self, api: Any, json_body: str | None = None, endpoint: str | None = None,
                       retry_timeout_seconds: int | None = None,
                       response_proto: Any = None) -> Any:
        run_id = _run_id_of(json_body) if api.__name__ in WRITE_APIS else None
        send = partial(RestStore._call_endpoint, self, api, json_body, endpoint,
                       retry_timeout_seconds, response_proto)
        if run_id is None:
            return send()
        sent = self._courier.submit(run_id, "rest", {"api": api.__name__, "body": json_body},
                                    send)
        return (response_proto or api.Response()) if sent is None else sent

    def create_run(self, *args: Any, **kwargs: Any) -> Run:
        """MLflow's create_run; the new run is the base of its offline view (a process that
        made its run itself, as ``monitor`` does, reads it back while the server is away)."""
        run = super().create_run(*args, **kwargs)
        self._courier.saw(run)
        return run

    def get_run(self, run_id: str) -> Run:
        return self._courier.read_run(run_id, partial(RestStore.get_run, self, run_id))


_UPLOADING = threading.local()


class JournaledArtifactsRepository(MlflowArtifactsRepository):
    """The tracking server's artifact proxy, with each upload journaled first; a file or
    folder the server did not take is copied into the journal and sent later."""

    def __init__(self, artifact_uri: str, tracking_uri: str | None = None,
                 registry_uri: str | None = None) -> None:
        super().__init__(artifact_uri, tracking_uri=tracking_uri, registry_uri=registry_uri)
        self._given_uri = artifact_uri
        self._tracking = tracking_uri or tracking_utils.get_tracking_uri()

    def log_artifact(self, local_file: str, artifact_path: str | None = None) -> None:
        self._journaled(local_file, artifact_path, True,
                        partial(HttpArtifactRepository.log_artifact, self, local_file,
                                artifact_path))

    def log_artifacts(self, local_dir: str, artifact_path: str | None = None) -> None:
        self._journaled(local_dir, artifact_path, False,
                        partial(HttpArtifactRepository.log_artifacts, self, local_dir,
                                artifact_path))

    def _journaled(self, local: str, artifact_path: str | None, file: bool,
                   upload: Callable[[], None]) -> None:
        run_id = _run_id_in(self._given_uri)
        if getattr(_UPLOADING, "active", False) or run_id is None:
            upload()  # a file of a folder being logged, or not a run's artifacts
            return
        _UPLOADING.active = True
        try:
            courier_for(self._tracking).submit(run_id, "artifacts", {
                "uri": self._given_uri, "local": str(Path(local).resolve()),
                "path": artifact_path, "file": file}, upload)
        finally:
            _UPLOADING.active = False


def _run_id_in(artifact_uri: str) -> str | None:
    """The run id in ``mlflow-artifacts:/EXPERIMENT/RUN_ID/artifacts``, else None."""
    parts = [p for p in urlsplit(artifact_uri).path.split("/") if p]
    if len(parts) >= 3 and parts[2] == "artifacts" and len(parts[1]) == 32:
        return parts[1]
    return None


def _build_journaled_store(store_uri: str, **_: Any) -> JournaledRestStore:
    return JournaledRestStore(store_uri)


def journal_runs_sent_to(tracking_uri: str) -> None:
    """In this process, journal every run write to the tracking server ``tracking_uri`` and
    bound every request to it (:data:`HTTP_BOUNDS`); nothing for other stores."""
    scheme = urlsplit(tracking_uri).scheme
    if scheme not in ("http", "https"):
        return
    for name, value in HTTP_BOUNDS.items():
        os.environ.setdefault(name, value)
    # one line says the server went away; urllib3 would add one per retried request
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    tracking_utils._tracking_store_registry.register(scheme, _build_journaled_store)
    type(tracking_utils._tracking_store_registry)._get_store_with_resolved_uri.cache_clear()
    artifact_repository_registry._artifact_repository_registry.register(
        "mlflow-artifacts", JournaledArtifactsRepository)
    tracking_utils._artifact_repos_cache.clear()
    install_at_exit_report()


_INSTALLED: list[bool] = []


def install_at_exit_report() -> None:
    """At this process's exit, say in one line per run what its journal still holds (once)."""
    if not _INSTALLED:
        _INSTALLED.append(True)
        atexit.register(_report_held_at_exit)


def undelivered(journal: RunJournal) -> str:
    """One line: what a run keeps in its journal and the command that sends it."""
    return (f"{store_noun(journal.tracking_uri)} at {journal.tracking_uri} did not take "
            f"{len(journal.pending())} writes of run {journal.run_id}; they are kept in "
            f"{journal.folder}; send them when it is back: mlflow-dlaas resend {journal.folder}")


def _report_held_at_exit() -> None:
    for journal in deliver_held(0.0):
        log.info(f"mlflow-dlaas: {undelivered(journal)}")


def deliver_held(within_s: float | None = None) -> list[RunJournal]:
    """At the end of a process: send what every run holds, for at most ``within_s``
    (:data:`DELIVER_WITHIN_ENV`, default 60 s); the journals left."""
    limit = float(os.environ.get(DELIVER_WITHIN_ENV, DELIVER_WITHIN_S)) if within_s is None \
        else within_s
    with _COURIERS_LOCK:
        couriers = list(_COURIERS.values())
    return [j for c in couriers for j in c.deliver(limit)]
