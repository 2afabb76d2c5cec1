"""The user's own MLflow Project as a study's target (examples/own_project_study.yaml and
projects made here): its metrics and our outside measurements in one run, settings applied
around it, and every way such a trial can go wrong ending with its reason."""

from __future__ import annotations

import socket
import subprocess
import textwrap
import time
import uuid
from pathlib import Path

import mlflow
import optuna
import pandas as pd
import pytest
import yaml

from mlflow_dlaas.launch import GIT_STALL_S
from mlflow_dlaas.own_project.phase_marks import PHASE_FILE_ENV
from mlflow_dlaas.report.tables import STATS_CONTRACT
from mlflow_dlaas.runs.schema import MAPPED_TAG, PEAK_MEMORY, REASON_TAG, VALIDITY_TAG, WALL_TIME
from mlflow_dlaas.tuning.recovery import REASON_ATTR
from tests.conftest import CommandResult, run_as_user

pytestmark = pytest.mark.slow

STUDY = "own-project-digits"


def _children(result: CommandResult, study: str) -> list[mlflow.entities.Run]:
    client = mlflow.MlflowClient(tracking_uri=result.store)
    experiments = [e.experiment_id for e in client.search_experiments()]
    return [r for r in client.search_runs(experiments, f"tags.`dlaas.study` = '{study}'")
            if r.data.tags.get("dlaas.role") == "trial"]


def test_the_example_study_measures_the_users_code_from_outside(
        own_project_study: CommandResult) -> None:
    assert own_project_study.returncode == 0, own_project_study.stderr[-4000:]
    assert "Traceback" not in own_project_study.stderr
    children = _children(own_project_study, STUDY)
    assert len(children) == 4
    for run in children:
        data = run.data
        assert run.info.status == "FINISHED", data.tags.get(REASON_TAG)
        assert {"val_loss", "val_accuracy"} <= set(data.metrics)  # the user's own calls
        assert {WALL_TIME, PEAK_MEMORY, "run/proc_cpu_seconds"} <= set(data.metrics)
        assert any(k.startswith("system/") for k in data.metrics)  # our timelines
        assert "train/duration_seconds" in data.metrics  # the phase helper's marks
        assert data.tags[VALIDITY_TAG] in ("valid", "disturbed")
        assert data.tags["dlaas.entry"] == "project"
        assert {"batch_size", "learning_rate", "intra_op_threads", "allocator"} <= set(
            data.params)
        mapped = data.tags[MAPPED_TAG]
        if data.params["allocator"] == "jemalloc":
            assert "libjemalloc" in mapped, mapped


def test_compare_reports_the_projects_runs_and_the_settings_effect(
        own_project_study: CommandResult, tmp_path: Path) -> None:
    done = run_as_user(f"mlflow-dlaas compare --study {STUDY} --include-disturbed "
                       f"--output {tmp_path / 'report'}", own_project_study.folder)
    assert done.returncode == 0, done.stderr[-3000:]
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Project runs" in html and "val_loss" in html and "wall time (s)" in html
    stats = pd.read_csv(tmp_path / "report" / "project_stats.csv")
    assert set(STATS_CONTRACT) <= set(stats.columns) and stats["run_ids"].notna().all()
    assert stats["runs"].sum() == 4


def _project(folder: Path, entry_points: dict[str, str], parameters: str = "") -> Path:
    """A small MLflow Project: one entry point per command."""
    folder.mkdir(parents=True, exist_ok=True)
    points = "\n".join(f"  {name}:\n{parameters}    command: \"{command}\""
                       for name, command in entry_points.items())
    (folder / "MLproject").write_text(f"name: {folder.name}\nentry_points:\n{points}\n")
    return folder


def _spec(folder: Path, name: str, project: str, entry: str, **extra: object) -> Path:
    spec = {"name": name, "project": project, "entry_point": entry, "n_trials": 1,
            "objectives": [{"metric": "score", "direction": "maximize"}], **extra}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


LOGS_SCORE = ("python -c 'import mlflow; mlflow.start_run(); mlflow.log_metric(\\\"score\\\", "
              "{x}); mlflow.end_run()'")
PARAMS = "    parameters:\n      x: {type: float, default: 1.0}\n"


def _trial(folder: Path, spec: Path) -> tuple[CommandResult, optuna.trial.FrozenTrial,
                                               mlflow.entities.Run]:
    done = run_as_user(f"mlflow-dlaas study {spec}", folder, timeout=300)
    study = optuna.load_study(study_name=spec.stem, storage=f"sqlite:///{folder / 'optuna.db'}")
    (run,) = _children(done, spec.stem)
    return done, study.trials[0], run


@pytest.mark.parametrize(("entry", "timeout", "reason"), [
    ("crash", 600, "the project's command exited with code 3"),
    ("silent", 600, "the trial did not log score"),
    ("hang", 4, "timed out after 4 s"),
])
def test_a_trial_that_goes_wrong_fails_with_its_reason(tmp_path: Path, entry: str,
                                                       timeout: int, reason: str) -> None:
    # a duration no other process on a shared machine has, so pgrep finds only this one's
    hang = f"sleep 120.{uuid.uuid4().int % 10**6:06d}"
    project = _project(tmp_path / "proj", {
        "crash": "python -c 'import sys; sys.exit(3)'",
        "silent": "python -c 'print(1)'",
        "hang": hang,
    })
    spec = _spec(tmp_path, f"wrong-{entry}", str(project), entry, trial_timeout_s=timeout)
    done, trial, run = _trial(tmp_path, spec)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert trial.state == optuna.trial.TrialState.FAIL
    assert reason in trial.user_attrs[REASON_ATTR]
    if entry == "silent":  # the code ran to its end: its run is a true record of that
        assert run.info.status == "FINISHED"
    else:
        assert run.info.status == "FAILED" and reason in run.data.tags[REASON_TAG]
    leftover = subprocess.run(["pgrep", "-f", hang], capture_output=True, text=True)
    assert not leftover.stdout.strip(), "the hung project's process outlived its trial"


def test_a_name_that_is_not_a_project_parameter_is_refused_before_anything_runs(
        tmp_path: Path) -> None:
    project = _project(tmp_path / "proj", {"main": LOGS_SCORE.format(x="{x}")}, PARAMS)
    spec = _spec(tmp_path, "bad-name", str(project), "main",
                 search_space={"batchsize": [1, 2]})
    done = run_as_user(f"mlflow-dlaas study {spec}", tmp_path)
    assert done.returncode == 2, done.stderr
    assert "batchsize: not a parameter of" in done.stderr and "(entry point main: x)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "optuna.db").exists()


def test_a_spec_naming_both_a_project_and_frameworks_is_refused(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "both", str(tmp_path), "main", frameworks=["pytorch"])
    done = run_as_user(f"mlflow-dlaas study --dry-run {spec}", tmp_path)
    assert done.returncode == 2
    assert "either project" in done.stderr and "not both" in done.stderr


def test_a_git_uri_project_runs_with_the_settings_applied(tmp_path: Path) -> None:
    """A project in a git repository (made here), its thread setting read back inside."""
    repo = _project(tmp_path / "repo", {"main": "python check.py {x}"}, PARAMS)
    (repo / "check.py").write_text(textwrap.dedent(f"""
        import os, sys, mlflow
        from mlflow_dlaas import phase
        with mlflow.start_run():
            with phase("work"):
                sum(range(10**6))
            mlflow.log_metric("score", float(sys.argv[1]))
            mlflow.log_param("seen_omp_threads", os.environ.get("OMP_NUM_THREADS"))
            mlflow.log_param("phase_file_set", str(bool(os.environ.get("{PHASE_FILE_ENV}"))))
    """))
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                "commit", "-qm", "project"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    spec = _spec(tmp_path, "from-git", f"file://{repo}", "main",
                 fixed={"x": 2.5, "intra_op_threads": 1})
    done, trial, run = _trial(tmp_path, spec)
    assert done.returncode == 0, done.stderr[-3000:]
    assert trial.values == [2.5]
    assert run.data.params["seen_omp_threads"] == "1"
    assert run.data.params["phase_file_set"] == "True"
    assert "work/duration_seconds" in run.data.metrics


def test_a_git_server_that_never_answers_is_one_line_within_the_bound(tmp_path: Path) -> None:
    """`study --dry-run` on a project whose git server accepts and never answers hung
    silently; git now gives up after GIT_STALL_S without a byte, and we say so."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()  # the kernel accepts; nobody ever answers
        uri = f"http://127.0.0.1:{server.getsockname()[1]}/project.git"
        spec = _spec(tmp_path, "hung-git", uri, "main")
        started = time.monotonic()
        done = run_as_user(f"mlflow-dlaas study --dry-run {spec}", tmp_path, timeout=120)
    assert time.monotonic() - started < GIT_STALL_S + 30
    assert done.returncode == 2, done.stderr
    assert f"the git server did not answer within {GIT_STALL_S} s" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
