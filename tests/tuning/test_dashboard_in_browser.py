"""optuna-dashboard, where docs/studies.md sends users, on a finished constrained study: the
objectives by name and each trial's link to its MLflow run, seen in Debian's Chromium."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.request import urlopen

import mlflow
import pytest

from tests.conftest import CommandResult, run_as_user, user_env
from tests.tuning.servers import MlflowServer
from tests.tuning.studies import (
    needs_torch,  # noqa: F401 - the fixture, used by name
    write_spec,
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
WAIT_MS = 60_000

pytestmark = pytest.mark.slow


@contextmanager
def dashboard(folder: Path) -> Iterator[str]:
    """``optuna-dashboard sqlite:///optuna.db`` as a user starts it in the study's folder."""
    command = shutil.which("optuna-dashboard", path=user_env(folder)["PATH"])
    if command is None:
        pytest.skip("optuna-dashboard is not installed (extra: dashboard; make test installs it)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([command, "sqlite:///optuna.db", "--host", "127.0.0.1", "--port",
                               str(port)], cwd=folder, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urlopen(f"{url}/dashboard", timeout=2).close()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read()
                assert time.monotonic() < deadline, "optuna-dashboard did not answer in 60 s"
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_dashboard_names_the_objective_and_links_each_trial_to_its_run(
        threading_study: CommandResult) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it with apt-get)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev extra")
    assert threading_study.returncode == 0, threading_study.stderr[-3000:]
    client = mlflow.MlflowClient(tracking_uri=threading_study.store)
    experiment = client.get_experiment_by_name("threading-pytorch")
    trials = {r.info.run_id for r in client.search_runs([experiment.experiment_id])
              if r.data.tags.get("dlaas.role") == "trial"}
    with dashboard(threading_study.folder) as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/dashboard/studies/1")
            page.get_by_text("threading-pytorch").first.wait_for(timeout=WAIT_MS)
            page.get_by_text("train_time_seconds").first.wait_for(timeout=WAIT_MS)
            assert "Objective 0" not in page.inner_text("body")
            page.goto(f"{url}/dashboard/studies/1/trials")
            page.get_by_text("mlflow_run_url").first.wait_for(timeout=WAIT_MS)
            shown = page.inner_text("body")
            page.get_by_text("MLflow runs").first.wait_for(timeout=WAIT_MS)  # the note
            links = page.eval_on_selector_all("a", "found => found.map(a => a.href)")
        finally:
            browser.close()
    linked = {run_id for run_id in trials
              if f"/#/experiments/{experiment.experiment_id}/runs/{run_id}" in shown}
    assert linked, shown[:3000]  # the trial on screen links to its real run
    clickable = {run_id for run_id in trials for link in links
                 if link.endswith(f"/#/experiments/{experiment.experiment_id}/runs/{run_id}"
                                  "?workflowType=machine_learning")}
    assert clickable, links  # the trial's note links to its run, as a link


@pytest.mark.usefixtures("needs_torch")
def test_a_trial_note_opens_its_run_on_the_ui_the_user_named(tmp_path: Path) -> None:
    """``study --ui-url`` naming an MLflow UI on another port than 5000: the link in the
    trial's note, followed in the browser, opens the trial's run there."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it with apt-get)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev extra")
    write_spec(tmp_path, name="linked", n_trials=1)
    # its port now, for --ui-url; it starts on the study's store once the study made it
    server = MlflowServer(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "served-artifacts")
    assert server.port != 5000
    done = run_as_user(f"mlflow-dlaas study linked.yaml --ui-url {server.url}", tmp_path, 600)
    assert done.returncode == 0, done.stderr[-3000:]
    client = mlflow.MlflowClient(tracking_uri=done.store)
    (trial,) = client.search_runs([client.get_experiment_by_name("linked").experiment_id],
                                  "tags.`dlaas.role` = 'trial'")
    server.start()
    try:
        with dashboard(tmp_path) as url, sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"{url}/dashboard/studies/1/trials")
                page.get_by_text("MLflow runs").first.wait_for(timeout=WAIT_MS)  # the note
                with page.expect_navigation(timeout=WAIT_MS):
                    page.get_by_role("link", name=trial.info.run_id[:8], exact=True).click()
                assert page.url.startswith(f"{server.url}/#/experiments/"
                                           f"{trial.info.experiment_id}/runs/{trial.info.run_id}")
                page.get_by_text(trial.info.run_name, exact=True).first.wait_for(
                    timeout=WAIT_MS)
                assert trial.info.run_id in page.inner_text("body")  # its Run ID row
            finally:
                browser.close()
    finally:
        server.stop()
