"""Every example spec is checked by ``study --dry-run`` as a user would, creating nothing; the
cheapest example of each kind (training, inference, user model, libraries) runs for real."""

from __future__ import annotations

import os
from pathlib import Path

import mlflow
import pytest
from click.testing import CliRunner

from mlflow_dlaas.cli import cli
from tests.conftest import ROOT, THREADING_STUDY, CommandResult, run_as_user, user_folder

SPECS = sorted([*(ROOT / "examples").glob("*.yaml"), *(ROOT / "examples/reproduce").glob("*.yaml")])
#: kind -> (the commands that prepare it, the example spec run with --trials 1); the training
#: kind is the documented threading study, run whole (the ``threading_study`` fixture)
CHEAPEST = {
    "inference": ((), "examples/inference_threads_study.yaml"),
    "user model": (("python examples/write_example_onnx.py /tmp/dlaas-example/classifier.onnx",),
                   "examples/user_onnx_inference_study.yaml"),
    "libraries": ((), "examples/libraries_pytorch.yaml"),
}


def _listing(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*")}


def test_a_dry_run_through_the_installed_command_creates_nothing(tmp_path_factory) -> None:
    folder = user_folder(tmp_path_factory, "dry")
    before = _listing(folder)
    done = run_as_user("mlflow-dlaas study --dry-run examples/libraries_pytorch.yaml", folder, 120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "dry run: nothing was created" in done.stdout
    assert _listing(folder) == before


@pytest.mark.parametrize("spec", SPECS, ids=[p.relative_to(ROOT).as_posix() for p in SPECS])
def test_every_example_dry_runs_and_creates_nothing(spec: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's own code, in this process (a process start per spec costs 1.4 s; the
    test above runs the installed command itself)."""
    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith("MLFLOW_")]:
        monkeypatch.delenv(name)
    done = CliRunner().invoke(cli, ["study", "--dry-run", str(spec)])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("study ") and "dry run: nothing was created" in done.output
    assert " runs, each in a fresh process" in done.output and "time: " in done.output
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("spec_text", "message"),
    [("frameworks: [pytorch]\nobjectives: [{metric: accuracy, direction: maximize}]\n"
      "search_space: {allocator: [default, hoard]}\n", "allocator"),
     ("frameworks: [mxnet]\nenv_manager: local\n"
      "objectives: [{metric: accuracy, direction: maximize}]\n",
      "mxnet needs mxnet==1.9.1, which is not installed in this environment"),
     ("frameworks: [pytorch]\nobjectives: []\n", "objectives: give at least one")],
    ids=["unknown-library", "framework-not-here", "no-objective"])
def test_a_bad_spec_dry_run_is_one_line_and_exit_2(spec_text: str, message: str,
                                                   tmp_path_factory) -> None:
    folder = user_folder(tmp_path_factory, "bad")
    (folder / "spec.yaml").write_text(spec_text)
    done = run_as_user("mlflow-dlaas study --dry-run spec.yaml", folder, 120)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("mlflow-dlaas: error: ") and message in line
    assert _listing(folder) == {Path(p) for p in ("projects", "examples", "MLproject",
                                                  "spec.yaml")}


def test_the_documented_training_example_runs_whole(threading_study: CommandResult) -> None:
    assert threading_study.returncode == 0, threading_study.stderr[-4000:]
    assert "Traceback" not in threading_study.stderr + threading_study.stdout
    assert "study done: 8 complete" in threading_study.stderr
    assert THREADING_STUDY.endswith("examples/threading_pytorch.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("kind", CHEAPEST)
def test_the_cheapest_example_of_each_kind_runs(kind: str, tmp_path_factory) -> None:
    prepare, spec = CHEAPEST[kind]
    folder = user_folder(tmp_path_factory, "example")
    for command in prepare:
        made = run_as_user(command, folder, 300)
        assert made.returncode == 0, made.stderr[-3000:]
    done: CommandResult = run_as_user(f"mlflow-dlaas study {spec} --trials 1", folder, 900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stderr + done.stdout
    assert "study done: 1 complete" in done.stderr
    client = mlflow.MlflowClient(tracking_uri=done.store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    roles = sorted(r.data.tags.get("dlaas.role", "") for r in runs)
    assert roles == ["study", "trial"], roles
    assert {r.info.status for r in runs} == {"FINISHED"}


def test_a_text_model_study_checks_for_transformers_in_each_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers", reason="the check names its installed version")
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["study", "--dry-run",
                                    str(ROOT / "examples/bert_inference.yaml")])
    assert done.exit_code == 0, done.output
    for project in ("pytorch", "onnxruntime", "openvino"):
        assert f"package: {project}: transformers " in done.output
    lenet = CliRunner().invoke(cli, ["study", "--dry-run",
                                     str(ROOT / "examples/inference_threads_study.yaml")])
    assert "transformers" not in lenet.output
