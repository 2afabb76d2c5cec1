"""Where runs are tracked: credentials never shown, an unreachable store refused in seconds."""

from __future__ import annotations

import contextlib
import http.server
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mlflow_dlaas.errors import TrackingUnavailableError
from mlflow_dlaas.redaction import redact_text
from mlflow_dlaas.store.store_uri import SUPPRESS_URL_ENV, quiet_run_links
from mlflow_dlaas.store.tracking import (
    TrackingTarget,
    check_reachable,
)

SECRET = "s3cret-pw"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A port whose server accepts every connection and never answers (a hung database)."""
    held: list[socket.socket] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.2)
        done = threading.Event()

        def accept() -> None:
            while not done.is_set():
                with contextlib.suppress(OSError):
                    held.append(server.accept()[0])

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield server.getsockname()[1]
        finally:
            done.set()
            thread.join()
            for connection in held:
                connection.close()


def test_the_browse_hint_hides_the_password() -> None:
    target = TrackingTarget(uri=f"http://alice:{SECRET}@host:5000", embedded=False)
    assert target.ui_command() == "open http://alice:***@host:5000 in a browser"
    db = TrackingTarget(uri=f"postgresql://bob:{SECRET}@db/mlflow", embedded=False)
    assert db.ui_command() == "mlflow ui --backend-store-uri postgresql://bob:***@db/mlflow"


def test_every_uri_in_a_message_is_redacted() -> None:
    text = (f"API request to http://alice:{SECRET}@host:5000/api/2.0/mlflow/runs/get failed; "
            f"storage 'postgresql://bob:{SECRET}@db/optuna' and https://host/x?token={SECRET}")
    shown = redact_text(text)
    assert SECRET not in shown
    assert "http://alice:***@host:5000/api/2.0/mlflow/runs/get failed" in shown
    assert "'postgresql://bob:***@db/optuna'" in shown
    plain = "sqlite:////tmp/mlflow.db, no secret"
    assert redact_text(plain) == plain


def test_mlflows_run_links_are_switched_off_only_for_uris_with_credentials(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SUPPRESS_URL_ENV, raising=False)
    quiet_run_links("http://host:5000")
    assert SUPPRESS_URL_ENV not in os.environ
    quiet_run_links(f"http://alice:{SECRET}@host:5000")
    assert os.environ[SUPPRESS_URL_ENV] == "true"


@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+psycopg", "http", "mysql"])
def test_an_unreachable_store_is_refused_within_the_bound(scheme: str) -> None:
    uri = f"{scheme}://nobody:{SECRET}@127.0.0.1:{_closed_port()}/x"
    started = time.monotonic()
    with pytest.raises(TrackingUnavailableError, match="cannot reach the tracking store") as e:
        check_reachable(uri, within_s=1.5)
    assert time.monotonic() - started < 5
    assert SECRET not in str(e.value) and "nobody:***@127.0.0.1" in str(e.value)


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "redis", "http"])
def test_a_store_that_accepts_and_never_answers_is_refused_within_the_bound(scheme: str) -> None:
    from mlflow_dlaas.optuna_access.storage import make_storage

    with silent_server() as port:
        uri = f"{scheme}://nobody:{SECRET}@127.0.0.1:{port}/x"
        started = time.monotonic()
        with pytest.raises(TrackingUnavailableError, match="did not answer") as e:
            if scheme == "redis":
                make_storage(uri.replace("/x", "/0"))
            else:
                check_reachable(uri, within_s=3)
    took = time.monotonic() - started
    assert took < (15 if scheme == "redis" else 6), took
    assert SECRET not in str(e.value) and "nobody:***@127.0.0.1" in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_local_stores_pass_at_once() -> None:
    for uri in ("sqlite:////tmp/none.db", "file:///tmp/mlruns", "/tmp/mlruns", "databricks"):
        check_reachable(uri, within_s=0.1)


def test_a_server_that_answers_passes_whatever_it_says() -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:  # the bare handler answers 501 to everything: an answer all the same
        check_reachable(f"http://127.0.0.1:{server.server_address[1]}", within_s=3)
    finally:
        server.shutdown()


@pytest.mark.slow
def test_monitor_says_the_store_is_unreachable_instead_of_retrying(cli_path: str) -> None:
    uri = f"postgresql://nobody@127.0.0.1:{_closed_port()}/x"
    started = time.monotonic()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
           "MLFLOW_TRACKING_URI": uri}
    out = subprocess.run([cli_path, "monitor", "--", "true"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 1
    assert time.monotonic() - started < 30
    assert out.stderr.strip().splitlines() == [
        f"mlflow-dlaas: error: cannot reach the tracking store "
        f"{uri.replace('nobody@', '***@')} within 10 s "
        "(Connection refused); start it, fix MLFLOW_TRACKING_URI, or unset it to track in the "
        "embedded store here"]


@pytest.mark.slow
def test_a_study_storage_that_never_answers_is_one_line_and_exit_1(cli_path: str,
                                                                   tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("frameworks: [pytorch]\nfixed: {model: mlp}\nn_trials: 1\n"
                    "objectives: [{metric: accuracy, direction: maximize}]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    with silent_server() as port:
        storage = f"postgresql+psycopg://u:{SECRET}@127.0.0.1:{port}/optuna"
        started = time.monotonic()
        out = subprocess.run([cli_path, "study", str(spec), "--storage", storage], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    assert time.monotonic() - started < 40
    errors = [line for line in out.stderr.splitlines() if "error" in line]
    assert errors == [f"mlflow-dlaas: error: the study storage postgresql+psycopg://u:***@"
                      f"127.0.0.1:{port}/optuna accepted the connection but did not answer "
                      "within 10 s (connection timeout expired); start it or give another "
                      "--storage"], out.stderr
    assert SECRET not in out.stderr + out.stdout
    assert "Traceback" not in out.stderr


def test_a_command_error_naming_a_uri_hides_its_password(cli_path: str, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("frameworks: [pytorch]\nfixed: {model: mlp}\n"
                    "objectives: [{metric: accuracy, direction: maximize}]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    out = subprocess.run([cli_path, "study", str(spec), "--storage", f"foo://u:{SECRET}@h/db"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "unknown study storage 'foo://u:***@h/db'" in out.stderr
    assert SECRET not in out.stderr + out.stdout
    assert not (tmp_path / "mlflow.db").exists()  # refused before any store was made


def test_a_sqlite_storage_in_a_missing_folder_is_refused_not_made(cli_path: str,
                                                                   tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("frameworks: [pytorch]\nfixed: {model: mlp}\n"
                    "objectives: [{metric: accuracy, direction: maximize}]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    missing = tmp_path / "no" / "such"
    out = subprocess.run([cli_path, "study", str(spec), "--storage",
                          f"sqlite:///{missing}/x.db"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert f"the folder {missing} does not exist" in out.stderr
    assert not missing.exists() and not (tmp_path / "mlflow.db").exists()


@pytest.mark.postgres
def test_a_refused_database_login_is_said_at_once() -> None:
    """MLflow itself retries a refused login ten times, for about 100 s."""
    server = os.environ.get("DLAAS_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432")
    parts = urlsplit(server)
    with socket.socket() as probe:
        if probe.connect_ex((parts.hostname, parts.port or 5432)) != 0:
            pytest.skip(f"no PostgreSQL answers at {server}; set DLAAS_TEST_POSTGRES_URL")
    uri = f"postgresql+psycopg://nobody:{SECRET}@{parts.hostname}:{parts.port or 5432}/x"
    started = time.monotonic()
    with pytest.raises(TrackingUnavailableError, match="refused the connection: .*nobody") as e:
        check_reachable(uri)
    assert time.monotonic() - started < 5
    assert SECRET not in str(e.value) and "check the user, password" in str(e.value)


def test_our_experiments_open_in_mlflows_model_training_view(tracking: str) -> None:
    """MLflow 3's UI picks its view from mlflow.experimentKind; with none it may open ours
    in GenAI mode. A kind the user set is never overridden."""
    import mlflow

    from mlflow_dlaas.store.experiments import EXPERIMENT_KIND_TAG, ensure_experiment
    from mlflow_dlaas.store.lifecycle import failing_run_guard

    client = mlflow.MlflowClient()
    made = ensure_experiment(f"kind-{uuid.uuid4().hex[:6]}")
    assert client.get_experiment(made).tags[EXPERIMENT_KIND_TAG] == "custom_model_development"
    users = client.create_experiment(f"users-{uuid.uuid4().hex[:6]}",
                                     tags={EXPERIMENT_KIND_TAG: "finetuning"})
    assert ensure_experiment(client.get_experiment(users).name) == users
    assert client.get_experiment(users).tags[EXPERIMENT_KIND_TAG] == "finetuning"
    plain = client.create_experiment(f"plain-{uuid.uuid4().hex[:6]}")  # `mlflow run` makes it
    mlflow.set_experiment(experiment_id=plain)
    with failing_run_guard():
        pass
    assert client.get_experiment(plain).tags[EXPERIMENT_KIND_TAG] == "custom_model_development"
