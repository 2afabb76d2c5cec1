"""The main job, as the README tells every user to run it first: ``make demo`` (which runs
``mlflow-dlaas demo``) on a fresh store in a fresh folder, and what it leaves behind."""

from __future__ import annotations

import re
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from mlflow_dlaas.demo import DEMO_EXPERIMENT, REPORT_DIR, SEARCH, SERVING, TRAIN_FRAMEWORKS
from mlflow_dlaas.libraries.settings import LIBRARY_SETTINGS
from mlflow_dlaas.report.collect import collect_runs
from mlflow_dlaas.report.publish import write_report
from mlflow_dlaas.report.report import TABLE_BUILDERS, Workloads, build_report
from mlflow_dlaas.report.tables import STATS_CONTRACT
from tests.conftest import CommandResult, run_as_user, user_folder

pytestmark = pytest.mark.slow


def _report(demo: CommandResult) -> Path:
    return demo.folder / REPORT_DIR


def _expected_tables() -> dict[str, str]:
    """Title prefix -> statistics CSV, for every table the demo's runs call for."""
    tables = {"Training": "training_stats.csv", "Inference": "inference_stats.csv"}
    if set(SEARCH) & set(LIBRARY_SETTINGS):  # the study varies a library: that table too
        tables["Parallel libraries"] = "parallel_stats.csv"
    return tables


def test_the_demo_exits_0_without_a_traceback(demo: CommandResult) -> None:
    assert demo.returncode == 0, demo.stderr[-4000:]
    for stream in (demo.stdout, demo.stderr):
        assert "Traceback" not in stream, stream[-4000:]


def test_the_demo_writes_every_report_file(demo: CommandResult) -> None:
    report = _report(demo)
    for name in ("report.html", "report.md", "runs.csv", *_expected_tables().values()):
        assert (report / name).is_file() and (report / name).stat().st_size, name
    plots = sorted((report / "plots").glob("*.png"))
    assert len(plots) >= 6, [p.name for p in plots]
    html = (report / "report.html").read_text()
    assert html.count("<img") == len(plots)
    stats = pd.read_csv(report / "training_stats.csv")
    assert set(STATS_CONTRACT) <= set(stats.columns)
    runs = pd.read_csv(report / "runs.csv")
    for run_ids in stats["run_ids"]:
        assert set(run_ids.split(",")) <= set(runs["run_id"])


def test_the_report_has_every_section_the_runs_call_for(demo: CommandResult) -> None:
    html = (_report(demo) / "report.html").read_text()
    assert "Recommendations</h2>" in html and "Plots</h2>" in html
    for title in _expected_tables():
        assert re.search(rf"<h2[^>]*>{re.escape(title)}", html), title
    assert "Could not be built" not in html
    table_text = re.sub(r"<[^>]+>", " ", html)
    for framework in TRAIN_FRAMEWORKS:
        assert framework in table_text
    for runtime, _, _ in SERVING:
        assert runtime in table_text


def test_the_demo_prints_its_recommendations_and_where_to_look(demo: CommandResult) -> None:
    assert "## Recommendations" in demo.stdout
    assert re.search(r"^- \*\*.+\*\*$", demo.stdout, re.MULTILINE), demo.stdout[-3000:]
    assert f"demo: report: {(_report(demo) / 'report.html').resolve()}" in demo.stderr
    assert "mlflow ui --backend-store-uri sqlite:///" in demo.stderr


def test_the_demo_leaves_no_run_running(demo: CommandResult) -> None:
    client = mlflow.MlflowClient(tracking_uri=demo.store)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, max_results=1000)
    assert len(runs) >= len(TRAIN_FRAMEWORKS) + len(SERVING)
    assert {r.info.status for r in runs} == {"FINISHED"}, [
        (r.info.run_name, r.info.status) for r in runs if r.info.status != "FINISHED"]


def test_every_table_builder_keeps_the_statistics_contract(demo: CommandResult,
                                                           tmp_path: Path) -> None:
    """Every section builder on the demo's real runs, then the whole report written again."""
    client = mlflow.MlflowClient(tracking_uri=demo.store)
    table = collect_runs(client, experiment=DEMO_EXPERIMENT, study=None)
    work = Workloads.of(table.finished)
    built = {name: build(work) for name, build in TABLE_BUILDERS}
    assert all(t is not None for t in built.values()), built  # the demo calls for each one
    for name, section_table in built.items():
        assert set(STATS_CONTRACT) <= set(section_table.stats.columns), name
        assert all(ids for ids in section_table.stats["run_ids"]), name
    mlflow.set_tracking_uri(demo.store)
    written = write_report(build_report(client, table, demo.store), tmp_path)
    assert written.failures == ()
    assert {p.name for p in written.files} >= {"report.html", "report.md", "runs.csv",
                                               *_expected_tables().values()}


def test_reproduce_writes_its_claims_report_on_the_demo_store(demo: CommandResult) -> None:
    """A store that holds no claim's study: the claims report still writes, and says why."""
    done = run_as_user("mlflow-dlaas reproduce --claims 8 --no-run --output claims",
                       demo.folder, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "claim 8: " in done.stdout
    assert (demo.folder / "claims" / "claims.html").is_file()


def test_mlflow_run_of_the_checkout_runs_the_main_job(tmp_path_factory) -> None:
    """``mlflow run . --env-manager local``, what MLflow users try first: the root MLproject's
    main entry point is the demo, under a launcher run that ends FINISHED like every other."""
    done = run_as_user("mlflow run . --env-manager local", user_folder(tmp_path_factory, "main"),
                       timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stdout + done.stderr
    assert (done.folder / REPORT_DIR / "report.html").is_file()
    assert "## Recommendations" in done.stdout
    client = mlflow.MlflowClient(tracking_uri=done.store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              max_results=1000)
    assert {r.info.status for r in runs} == {"FINISHED"}
    launcher = [r for r in runs if r.data.tags.get("mlflow.project.entryPoint") == "main"]
    assert len(launcher) == 1
