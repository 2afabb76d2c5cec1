"""The MLflow UI as a person choosing a framework sees it: a real `mlflow server` on the
measured runs, Debian's Chromium, headless."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import mlflow
import pytest

from mlflow_dlaas.runs.ui_links import run_url
from tests.report.conftest import ROOT, Measured
from tests.tuning.servers import mlflow_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
#: the names MLflow makes up for unnamed runs
GENERATED_NAME = re.compile(r"^[a-z]+-[a-z]+-\d{1,4}$", re.MULTILINE)
WAIT_MS = 60_000
#: a chart section of the run page's Model metrics tab: its name and chart count
SECTION = re.compile(r"^(\S+)\n\((\d+)\)\nAdd chart$", re.MULTILINE)
#: a laptop's browser window: what a person sees before scrolling
VIEWPORT = {"width": 1400, "height": 900}
#: where docs/mlflow-ui.md sends a person to see an experiment's runs
DOCUMENTED_PAGE = re.compile(r"Open `http://127\.0\.0\.1:5000(/#/experiments/<id>[^`]*)`")
#: a figure with its unit: ``0.481 s``, ``8,960 samples/s``, ``489 MB``, ``1.2 ms``
FIGURE = re.compile(r"\d[\d,.]* (?:s|ms|samples/s|MB)\b")


@pytest.fixture(scope="module")
def ui(measured: Measured, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `mlflow server` on the measured runs, on loopback as `mlflow ui` is: its URL."""
    with mlflow_server(measured.uri, tmp_path_factory.mktemp("artifacts")) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it with apt-get)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev extra")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def first_visit(browser: Browser) -> Iterator[Page]:
    """A page in a fresh profile, as on a person's first visit: no setting of MLflow's UI
    stored (its GenAI / Model training switch, its panels), the window :data:`VIEWPORT`."""
    with browser.new_context(viewport=VIEWPORT) as context:
        yield context.new_page()


def experiment_id(measured: Measured) -> str:
    """The measured experiment's id."""
    return mlflow.MlflowClient(measured.uri).get_experiment_by_name(
        measured.experiment).experiment_id


def test_runs_have_names_and_system_metric_charts(measured: Measured, ui: str,
                                                  browser: Browser, tmp_path: Path) -> None:
    experiment = experiment_id(measured)
    training_run = measured.train["pytorch"][0]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{ui}/#/experiments/{experiment}/runs")
        page.get_by_text("pytorch-mlp-bs32").first.wait_for(timeout=WAIT_MS)
        listing = page.inner_text("body")
        for name in (r"tensorflow-mlp-bs32\b", r"onnxruntime-mlp-bs1,4-t1\b",
                     r"onnxruntime-mlp-bs1,4-t2\b", r"pytorch-mlp-bs1,4-t1\b"):
            assert re.search(name, listing), (name, listing)
        assert not GENERATED_NAME.search(listing), GENERATED_NAME.findall(listing)
        assert "digits (" in listing  # the dataset column: name (digest)

        page.goto(f"{ui}/#/experiments/{experiment}/runs/{training_run}/system-metrics")
        page.get_by_text("process_tree_rss_megabytes").first.wait_for(timeout=WAIT_MS)
        tab = page.inner_text("body")
        charts = re.search(r"System metrics\s*\((\d+)\)", tab)
        assert charts and int(charts.group(1)) >= 4, tab[:2000]
        assert "cpu_utilization_percentage" in tab
        plots = page.locator(".js-plotly-plot")
        plots.first.wait_for(timeout=WAIT_MS)
        assert plots.count() >= 4
        assert plots.first.locator("path.js-line").count() >= 1  # a line is drawn

        page.goto(f"{ui}/#/experiments/{experiment}/runs/{training_run}")
        page.get_by_text("Training pytorch mlp on digits").first.wait_for(timeout=WAIT_MS)
        assert "test accuracy" in page.inner_text("body")

        page.goto(f"{ui}/#/experiments/{experiment}/runs/{training_run}/model-metrics")
        page.get_by_text("peak_memory_megabytes").first.wait_for(timeout=WAIT_MS)
        page.screenshot(path=str(tmp_path / "model-metrics.png"))
        sections = SECTION.findall(page.inner_text("body"))
        assert sections[0][0] == "Headline" and int(sections[0][1]) >= 5, sections
        assert "train" in dict(sections) and "system" not in dict(sections)
    finally:
        page.close()


def test_the_documented_experiment_page_opens_on_the_training_view(
        measured: Measured, ui: str, first_visit: Page) -> None:
    """The address docs/mlflow-ui.md gives, on a first visit, shows MLflow's model-training
    view (its navigation: runs, models, model registry) with the training runs, not its
    GenAI view (traces, sessions, judges, evaluation runs)."""
    documented = DOCUMENTED_PAGE.search((ROOT / "docs" / "mlflow-ui.md").read_text())
    assert documented, "docs/mlflow-ui.md no longer names the experiment page's address"
    first_visit.goto(ui + documented.group(1).replace("<id>", experiment_id(measured)))
    first_visit.get_by_text("pytorch-mlp-bs32").first.wait_for(timeout=WAIT_MS)
    assert re.search(r"tensorflow-mlp-bs32\b", first_visit.inner_text("body"))
    navigation = first_visit.locator("nav").first.inner_text().splitlines()
    assert {"Runs", "Models", "Model registry"} <= set(navigation), " | ".join(navigation)
    assert not {"Judges", "Sessions", "Evaluation runs"} & set(navigation), " | ".join(navigation)


def test_a_run_page_opens_on_its_headline_figures(measured: Measured, ui: str,
                                                  first_visit: Page) -> None:
    """A training run's Overview, opened by the link our commands print: the description's
    first paragraph, the headline figures with their units, is on screen whole, without
    scrolling or "Show more". MLflow 3.17 opens its Assistant panel on a first visit to a
    local UI; with it open the page falls under its narrow layout, which lists every tag
    above the description (there our 17 tags leave the paragraph's top at y = 898 of 900),
    so the test closes the panel as a person does once (the browser remembers it)."""
    first_visit.goto(run_url(experiment_id(measured), measured.train["pytorch"][0], ui))
    headline = first_visit.get_by_test_id("note-editor-preview-content").locator(
        "> :first-child")
    headline.wait_for(timeout=WAIT_MS)
    panel = first_visit.locator(".assistant-fab-label")
    if first_visit.get_by_text("Ask questions about your").count():  # the panel is open
        first_visit.get_by_role("button", name="Close").first.click()
        panel.first.wait_for(timeout=WAIT_MS)  # folded into its floating button
        first_visit.wait_for_timeout(500)  # the page takes its wide layout
    shown = headline.inner_text()
    assert FIGURE.search(shown), shown
    box = headline.bounding_box()
    assert box and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"], box
    assert headline.evaluate(  # nothing covers it: a panel, the folded description's edge
        "e => { const r = e.getBoundingClientRect();"
        " return e.contains(document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2)); }")
