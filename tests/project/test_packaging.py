"""The wheel carries the MLflow Projects: an install without the checkout runs studies, and
each project's command finds the mlflow-dlaas package beside it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
from click.testing import CliRunner

from mlflow_dlaas.cli import cli
from mlflow_dlaas.project_paths import PROJECTS_ENV
from tests.tuning.studies import write_spec

ROOT = Path(__file__).resolve().parents[2]
#: What an sdist is built from; MANIFEST.in and setup.py decide what goes on into the wheel.
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "mlflow_dlaas", "projects",
           "examples/reproduce")
PROJECT_FILES = sorted(p.relative_to(ROOT / "projects").as_posix()
                       for p in (ROOT / "projects").rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts)
#: Signs in pip's output that no package index could be reached (then the test skips).
OFFLINE = ("NewConnectionError", "Temporary failure in name resolution",
           "Network is unreachable", "Failed to establish a new connection")


def _build(kind: str, source: Path, out: Path) -> Path:
    """Build an sdist or a wheel of ``source`` with setuptools' PEP 517 backend, as pip does."""
    code = f"from setuptools import build_meta as b; print(b.build_{kind}({str(out)!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=source, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from an sdist of this checkout (as ``python -m build`` does)."""
    pytest.importorskip("setuptools", minversion="77", reason="building needs setuptools>=77")
    tmp = tmp_path_factory.mktemp("build")
    source = tmp / "source"
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, source / name, ignore=shutil.ignore_patterns(
                "__pycache__", "*.py[co]", "*.egg-info"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(src, source / name)
    sdist = _build("sdist", source, tmp / "dist")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp / "unpacked", filter="data")
    (unpacked,) = (tmp / "unpacked").iterdir()
    return _build("wheel", unpacked, tmp / "dist")


def test_the_wheel_carries_every_project_as_package_data(wheel: Path) -> None:
    assert {"run_workload.py", "pytorch/MLproject", "mxnet/python_env.yaml"} <= set(PROJECT_FILES)
    with zipfile.ZipFile(wheel) as archive:
        for name in PROJECT_FILES:
            packaged = archive.read(f"mlflow_dlaas/projects/{name}")
            assert packaged == (ROOT / "projects" / name).read_bytes(), name


def test_the_wheel_carries_the_claims_study_specs(wheel: Path) -> None:
    specs = sorted((ROOT / "examples" / "reproduce").glob("*.yaml"))
    assert specs
    with zipfile.ZipFile(wheel) as archive:
        for spec in specs:
            assert archive.read(f"mlflow_dlaas/reproduce/specs/{spec.name}") == spec.read_bytes()


def _fake_install(tmp_path: Path, layout: str) -> tuple[Path, Path]:
    """A package ``mlflow_dlaas`` (with a probe module) beside a ``projects/run_workload.py``,
    as a wheel or a checkout lays them out, next to a decoy package; returns (package, script).
    """
    top = tmp_path / layout
    package = top / "mlflow_dlaas"
    projects = package / "projects" if layout == "wheel" else top / "projects"
    projects.mkdir(parents=True)
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "probe.py").write_text(
        "import importlib.util, json, os, subprocess, sys\n"
        "import mlflow_dlaas\n"
        "child = subprocess.run([sys.executable, '-c', 'import mlflow_dlaas; "
        "print(mlflow_dlaas.__file__)'], capture_output=True, text=True).stdout.strip()\n"
        "print(json.dumps({'package': mlflow_dlaas.__file__, 'child': child,\n"
        "                  'decoy': importlib.util.find_spec('decoy') is not None,\n"
        "                  'argv': sys.argv[1:], 'path': os.environ['PYTHONPATH']}))\n")
    (top / "decoy").mkdir()
    (top / "decoy" / "__init__.py").write_text("")
    shutil.copy2(ROOT / "projects" / "run_workload.py", projects / "run_workload.py")
    return package.resolve(), projects / "run_workload.py"


def _run_workload(script: Path, env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, str(script), "mlflow_dlaas.probe", "--x", "1"],
                          cwd=script.parent, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("layout", ["wheel", "checkout"])
def test_a_project_command_imports_the_package_beside_it_and_nothing_else(
    tmp_path: Path, layout: str
) -> None:
    # this interpreter imports the checkout's mlflow_dlaas, as a virtualenv environment
    # imports none: either way the package beside the projects must win, alone
    package, script = _fake_install(tmp_path, layout)
    cache = tmp_path / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(tmp_path / "other")}
    seen = _run_workload(script, env)
    assert Path(seen["package"]).resolve() == package / "__init__.py"
    assert Path(seen["child"]).resolve() == package / "__init__.py"  # subprocesses too
    assert not seen["decoy"]  # a wheel's site-packages would shadow the environment's own
    assert seen["argv"] == ["--x", "1"]
    assert seen["path"].endswith(os.pathsep + str(tmp_path / "other"))  # kept, after it
    (link,) = (cache / "mlflow-dlaas" / "import-roots").glob("*/mlflow_dlaas")
    assert link.resolve() == package
    assert _run_workload(script, env)["package"] == seen["package"]  # the link is reused


def test_a_project_command_changes_nothing_where_the_package_imports_already(
    tmp_path: Path,
) -> None:
    package, script = _fake_install(tmp_path, "wheel")
    cache = tmp_path / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(package.parent)}
    seen = _run_workload(script, env)
    assert Path(seen["package"]).resolve() == package / "__init__.py"
    assert seen["decoy"]  # PYTHONPATH as given, nothing put before it
    assert not cache.exists()


def test_projects_path_prints_the_folders_for_mlflow_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROJECTS_ENV, raising=False)
    runner = CliRunner()
    out = runner.invoke(cli, ["projects-path"])
    assert out.exit_code == 0, out.output
    assert (Path(out.output.strip()) / "pytorch" / "MLproject").is_file()
    out = runner.invoke(cli, ["projects-path", "onnxruntime"])
    assert out.exit_code == 0, out.output
    assert (Path(out.output.strip()) / "MLproject").is_file()

    out = runner.invoke(cli, ["projects-path", "caffe"])
    assert out.exit_code == 2
    assert "no MLflow Project 'caffe'" in out.output and "pytorch, tensorflow" in out.output
    monkeypatch.setenv(PROJECTS_ENV, "/nonexistent")
    out = runner.invoke(cli, ["projects-path"])
    assert out.exit_code == 2 and f"{PROJECTS_ENV}=/nonexistent holds no MLflow" in out.output


@pytest.fixture
def venv(tmp_path: Path) -> Iterator[Path]:
    """A fresh virtual environment, removed afterwards (with torch and MLflow: 1.8 GB)."""
    path = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_a_fresh_venv_with_only_the_wheel_runs_a_one_trial_study(
    wheel: Path, venv: Path, tmp_path: Path
) -> None:
    """With pip's cache warm, about 2.5 min on 2 quiet cores (50 s of it to install), 4 to 5
    min on busy ones."""
    bin_dir = venv / "bin"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    started = time.monotonic()
    # --no-compile: byte-compiling torch and MLflow would double the install time
    install = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--no-compile", "--retries", "2",
         "--timeout", "30", f"{wheel}[torch]"],
        env=env, capture_output=True, text=True, timeout=900)
    if install.returncode != 0 and any(sign in install.stdout + install.stderr
                                       for sign in OFFLINE):
        pytest.skip("no package index reachable to install the wheel's dependencies")
    assert install.returncode == 0, install.stderr[-3000:]
    installed_s = time.monotonic() - started

    work = tmp_path / "work"  # a folder outside the checkout
    work.mkdir()
    located = subprocess.run([str(bin_dir / "mlflow-dlaas"), "projects-path", "pytorch"],
                             cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert located.returncode == 0, located.stderr
    project = Path(located.stdout.strip())
    assert project.is_relative_to(venv) and (project / "MLproject").is_file()

    name = f"wheel-study-{os.getpid()}"
    spec = write_spec(work, name=name, n_trials=1, search_space={"batch_size": [32]})
    store = f"sqlite:///{work / 'mlflow.db'}"
    study = subprocess.run([str(bin_dir / "mlflow-dlaas"), "study", str(spec)], cwd=work,
                           env={**env, "MLFLOW_TRACKING_URI": store}, capture_output=True,
                           text=True, timeout=600)
    assert study.returncode == 0, study.stderr[-3000:]
    client = mlflow.MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id])
    trials = [r for r in runs if r.data.tags.get("dlaas.role") == "trial"]
    assert [r.info.status for r in trials] == ["FINISHED"], study.stderr[-3000:]
    print(f"installed in {installed_s:.0f} s, whole test {time.monotonic() - started:.0f} s")
