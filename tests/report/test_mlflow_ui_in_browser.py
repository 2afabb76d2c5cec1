"""The MLflow UI as a person choosing a framework sees it: a real `mlflow server` on the
measured runs, Debian's Chromium, headless."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import mlflow
import pytest

from tests.report.conftest import Measured
from tests.tuning.servers import mlflow_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
#: the names MLflow makes up for unnamed runs
GENERATED_NAME = re.compile(r"^[a-z]+-[a-z]+-\d{1,4}$", re.MULTILINE)
WAIT_MS = 60_000
#: a chart section of the run page's Model metrics tab: its name and chart count
SECTION = re.compile(r"^(\S+)\n\((\d+)\)\nAdd chart$", re.MULTILINE)


def test_runs_have_names_and_system_metric_charts(measured: Measured, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it with apt-get)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev extra")
    experiment_id = mlflow.MlflowClient(measured.uri).get_experiment_by_name(
        measured.experiment).experiment_id
    training_run = measured.train["pytorch"][0]
    with mlflow_server(measured.uri, tmp_path / "artifacts") as url, \
            sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/#/experiments/{experiment_id}/runs")
            page.get_by_text("pytorch-mlp-bs32").first.wait_for(timeout=WAIT_MS)
            listing = page.inner_text("body")
            for name in (r"tensorflow-mlp-bs32\b", r"onnxruntime-mlp-bs1,4-t1\b",
                         r"onnxruntime-mlp-bs1,4-t2\b", r"pytorch-mlp-bs1,4-t1\b"):
                assert re.search(name, listing), (name, listing)
            assert not GENERATED_NAME.search(listing), GENERATED_NAME.findall(listing)
            assert "digits (" in listing  # the dataset column: name (digest)

            page.goto(f"{url}/#/experiments/{experiment_id}/runs/{training_run}/system-metrics")
            page.get_by_text("process_tree_rss_megabytes").first.wait_for(timeout=WAIT_MS)
            tab = page.inner_text("body")
            charts = re.search(r"System metrics\s*\((\d+)\)", tab)
            assert charts and int(charts.group(1)) >= 4, tab[:2000]
            assert "cpu_utilization_percentage" in tab
            plots = page.locator(".js-plotly-plot")
            plots.first.wait_for(timeout=WAIT_MS)
            assert plots.count() >= 4
            assert plots.first.locator("path.js-line").count() >= 1  # a line is drawn

            page.goto(f"{url}/#/experiments/{experiment_id}/runs/{training_run}")
            page.get_by_text("Training pytorch mlp on digits").first.wait_for(timeout=WAIT_MS)
            assert "test accuracy" in page.inner_text("body")

            page.goto(f"{url}/#/experiments/{experiment_id}/runs/{training_run}/model-metrics")
            page.get_by_text("peak_memory_megabytes").first.wait_for(timeout=WAIT_MS)
            page.screenshot(path=str(tmp_path / "model-metrics.png"))
            sections = SECTION.findall(page.inner_text("body"))
            assert sections[0][0] == "Headline" and int(sections[0][1]) >= 5, sections
            assert "train" in dict(sections) and "system" not in dict(sections)
        finally:
            browser.close()
