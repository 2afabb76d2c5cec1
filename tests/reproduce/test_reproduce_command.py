"""``mlflow-dlaas reproduce`` end to end on a tiny budget: a real study, verdicts, the report
(as a run, and in Chromium), and a rerun that resumes instead of measuring again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pytest
import yaml

from mlflow_dlaas.store.store_uri import ACTIVE_ENV, TRACKING_ENV
from tests.report.test_report_in_browser import CHROMIUM, FLAGS

pytestmark = pytest.mark.slow

EXPERIMENT = "reproduce-test"
#: claim 2's study on the cheapest real runs; claim 4 is judged on the same runs
CLAIMS = "2,4"
TINY = {"name": "reproduce-claim2-quick", "experiment": "dlaas-reproduce",
        "frameworks": ["pytorch"], "entry_point": "train",
        "fixed": {"model": "mlp", "dataset": "digits", "epochs": 1, "warmup_steps": 0,
                  "log_model": "false", "monitor_interval": 0.2},
        "search_space": {"batch_size": [16, 256]},
        "objectives": [{"metric": "accuracy", "direction": "maximize"}],
        "sampler": "grid", "n_trials": 2, "replicates": 4}


@dataclass(frozen=True)
class Reproduced:
    root: Path
    env: dict[str, str]
    first: subprocess.CompletedProcess
    output: Path

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return _run(self.root, self.env, *args)


def _run(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    cli = shutil.which("mlflow-dlaas", path=env["PATH"])
    if cli is None:
        pytest.skip("the mlflow-dlaas console script is not on PATH; run the tests with make test")
    return subprocess.run([cli, "reproduce", *args], env=env, cwd=root, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory: pytest.TempPathFactory) -> Reproduced:
    """One `mlflow-dlaas reproduce --claims 2,4` on 8 tiny PyTorch runs (about a minute)."""
    root = tmp_path_factory.mktemp("reproduce")
    specs = root / "specs"
    specs.mkdir()
    (specs / "claim2-hyperparameters-quick.yaml").write_text(yaml.safe_dump(TINY))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update({TRACKING_ENV: f"sqlite:///{root / 'mlflow.db'}", ACTIVE_ENV: "0",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"})
    output = root / "report"
    # runs on a shared 2-core machine are often disturbed: let them count, as the report says
    done = _run(root, env, "--quick", "--claims", CLAIMS, "--experiment", EXPERIMENT,
                "--specs", str(specs), "--output", str(output), "--include-disturbed")
    assert done.returncode == 0, done.stderr[-4000:]
    return Reproduced(root, env, done, output)


def _runs(reproduced: Reproduced) -> list[mlflow.entities.Run]:
    mlflow.set_tracking_uri(reproduced.env[TRACKING_ENV])
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name(EXPERIMENT)
    return client.search_runs([experiment.experiment_id], max_results=1000)


def test_one_claim_end_to_end(reproduced: Reproduced) -> None:
    err, out = reproduced.first.stderr, reproduced.first.stdout
    assert "reproduce --quick: 1 study, 8 runs; fits in 20 minutes on 2 cores" in err
    assert "[step 1/1] claims 2, 4: study reproduce-test-reproduce-claim2-quick" in err
    assert "min left" in err
    lines = {line.split(":")[0]: line for line in out.splitlines() if line.startswith("claim")}
    assert set(lines) == {"claim 2", "claim 4"}
    # one framework only: claim 2's "differs per framework" part cannot be separated
    assert lines["claim 2"].startswith(("claim 2: not separable", "claim 2: does not hold"))
    assert "needs one hyper-parameter varied in two frameworks" in lines["claim 2"]
    runs = _runs(reproduced)
    trials = [r for r in runs if r.data.tags.get("dlaas.role") == "trial"]
    assert len(trials) == 8 and all(r.info.status == "FINISHED" for r in trials)
    (report,) = [r for r in runs if r.data.tags.get("dlaas.role") == "report"]
    assert report.info.status == "FINISHED"
    assert report.data.tags["dlaas.claim.4"].split(":")[0] in lines["claim 4"]
    assert report.data.tags["dlaas.claim.2"].split(":")[0] in lines["claim 2"]
    client = mlflow.MlflowClient()
    logged = {a.path for a in client.list_artifacts(report.info.run_id, "report")}
    assert {"report/claims.html", "report/claims.md"} <= logged
    markdown = (reproduced.output / "claims.md").read_text()
    assert "## How a verdict is decided" in markdown and "permutation test" in markdown
    assert "4 vs 4 runs" in markdown  # the tests behind the verdict, with their runs
    assert trials[0].info.run_id[:8] in markdown  # evidence runs are linked


def test_a_rerun_resumes_without_measuring_again(reproduced: Reproduced) -> None:
    before = len(_runs(reproduced))
    again = reproduced.run("--claims", "2", "--experiment", EXPERIMENT, "--specs",
                           str(reproduced.root / "specs"), "--no-run", "--include-disturbed",
                           "--output", str(reproduced.root / "again"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(_runs(reproduced)) == before  # no new trial, no report run (--no-run)
    assert "study done: 2 complete" in again.stderr


def test_bad_input_is_one_line_and_exit_2(reproduced: Reproduced) -> None:
    for args, said in ((["--claims", "9"], "unknown claim '9'"),
                       (["--specs", str(reproduced.root / "nowhere")], "no such folder")):
        done = reproduced.run(*args)
        assert done.returncode == 2
        assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1
    both = reproduced.run("--quick", "--full")
    assert both.returncode == 2 and "give --quick or --full, not both" in both.stderr


def test_report_in_chromium_shows_one_row_per_claim(reproduced: Reproduced,
                                                    tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it with apt-get)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev extra")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto((reproduced.output / "claims.html").as_uri())
            rows = page.locator("table.claims tbody tr")
            assert rows.count() == 2
            seen = {}
            for i in range(2):
                row = rows.nth(i)
                assert row.is_visible()
                verdict = row.locator("td.verdict")
                seen[row.get_attribute("data-claim")] = verdict.inner_text()
                colour = verdict.evaluate("td => getComputedStyle(td).backgroundColor")
                assert colour not in ("rgba(0, 0, 0, 0)", "transparent")  # coloured by verdict
            assert seen["2"] in ("not separable", "does not hold")
            assert seen["4"] in ("holds", "not separable", "does not hold")
            plot = page.locator("#claim-2 ~ figure img").first
            plot.scroll_into_view_if_needed()
            assert plot.evaluate("img => img.complete ? img.naturalWidth : 0") > 300
            page.screenshot(path=str(tmp_path / "claims.png"), full_page=True)
        finally:
            browser.close()
