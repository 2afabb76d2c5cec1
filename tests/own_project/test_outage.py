"""A grid study over the user's own project whose tracking server dies mid-trial: the
trial failed by the outage (the project's own ``mlflow.log_metric`` raised) is measured
again once the server is back, so no grid point is lost to it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import mlflow
import pytest
import yaml

from mlflow_dlaas.store.journal import JOURNAL_ENV
from tests.conftest import user_env
from tests.tuning.servers import MlflowServer

pytestmark = pytest.mark.slow
POINTS = [1, 2, 3]  # one measured before the outage, one cut by it, one after


def _project(folder: Path) -> Path:
    project = folder / "project"
    project.mkdir()
    (project / "MLproject").write_text(textwrap.dedent("""\
        name: outage
        entry_points:
          main:
            parameters: {x: {type: int, default: 1}}
            command: python step.py {x}
        """))
    (project / "step.py").write_text(textwrap.dedent("""\
        import sys, time
        import mlflow
        time.sleep(3)  # the test stops the server while trial 1 waits here
        mlflow.log_metric("score", float(sys.argv[1]))
        """))
    return project


def _study(folder: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([str(Path(sys.executable).parent / "mlflow-dlaas"), "study",
                             "spec.yaml"], cwd=folder, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _trial_runs(url: str) -> list[mlflow.entities.Run]:
    client = mlflow.MlflowClient(tracking_uri=url)
    found = client.get_experiment_by_name("outage")
    if found is None:
        return []
    return [r for r in client.search_runs([found.experiment_id])
            if r.data.tags.get("dlaas.role") == "trial"]


def test_a_point_failed_by_the_servers_outage_is_measured_once_it_is_back(
        tmp_path: Path) -> None:
    _project(tmp_path)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({
        "name": "outage", "project": "project", "entry_point": "main", "env_manager": "local",
        "search_space": {"x": POINTS}, "sampler": "grid", "n_trials": len(POINTS),
        "objectives": [{"metric": "score", "direction": "maximize"}]}))
    server = MlflowServer(f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "artifacts")
    server.start()
    env = {**user_env(tmp_path), "MLFLOW_TRACKING_URI": server.url,
           JOURNAL_ENV: str(tmp_path / "journal")}
    try:
        study = _study(tmp_path, env)
        deadline = time.monotonic() + 300
        while len(_trial_runs(server.url)) < 2 and time.monotonic() < deadline:
            time.sleep(0.3)  # trial 0 done, trial 1 started
        assert study.poll() is None, study.communicate()[1][-3000:]
        server.kill()
        _, first = study.communicate(timeout=600)
        server.start()
        sent = subprocess.run([str(Path(sys.executable).parent / "mlflow-dlaas"), "resend"],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert sent.returncode == 0, sent.stderr[-3000:]
        again = _study(tmp_path, env)
        _, second = again.communicate(timeout=900)
        assert again.returncode == 0, first[-3000:] + second[-3000:]
        assert f"grid: {len(POINTS)} of {len(POINTS)} points measured" in second, \
            first[-3000:] + second[-3000:]
        scores = sorted(r.data.metrics["score"] for r in _trial_runs(server.url)
                        if r.info.status == "FINISHED")
        assert scores == [float(x) for x in POINTS]  # each point measured once, none lost
        assert not [r for r in _trial_runs(server.url) if r.info.status == "RUNNING"]
    finally:
        server.kill()
