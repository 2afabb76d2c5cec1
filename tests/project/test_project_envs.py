"""Each projects/<framework> environment carries mlflow-dlaas's own dependencies, and
``mlflow-dlaas prepare`` builds one ahead of its first run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = sorted(p.parent.name for p in (ROOT / "projects").glob("*/python_env.yaml"))


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()


@pytest.mark.parametrize("project", PROJECTS)
def test_project_env_has_every_core_dependency(project: str) -> None:
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((ROOT / "projects" / project / "python_env.yaml").read_text())
    listed = {_name(d) for d in env["dependencies"]}
    missing = {_name(d) for d in core} - listed
    assert not missing, f"projects/{project}/python_env.yaml lacks {sorted(missing)}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", env["python"]), "name an exact Python that pyenv has"
    assert "mlflow==3.17.2" in env["dependencies"]


def test_every_framework_and_runtime_has_a_project() -> None:
    from mlflow_dlaas.backends import FRAMEWORKS, RUNTIMES

    assert set(FRAMEWORKS) | set(RUNTIMES) <= set(PROJECTS)


def test_prepare_builds_mxnets_environment_once_and_says_where(cli_path: str) -> None:
    """``mlflow-dlaas prepare mxnet`` (``make demo`` / ``make test`` run it): the folder it
    names is the environment MXNet's runs activate; a second call finds it built and does not
    say it builds."""
    first, again = (subprocess.run([cli_path, "prepare", "mxnet"], capture_output=True,
                                   text=True, timeout=900) for _ in range(2))
    assert first.returncode == 0, first.stderr
    folder = Path(first.stdout.strip().split(": ", 1)[1])
    assert (folder / "bin" / "activate").is_file()
    assert again.stdout == first.stdout
    assert "building" not in again.stderr, again.stderr  # built: it says so only when it is not
    listed = subprocess.run([str(folder / "bin" / "python"), "-c",
                             "import numpy, mxnet; print(numpy.__version__)"],
                            capture_output=True, text=True, timeout=120)
    assert listed.stdout.startswith("1.23"), listed.stderr


@pytest.mark.parametrize("args", [["nosuch"], ["mxnet", "--env-manager", "local"]])
def test_prepare_refuses_an_unknown_project_or_manager_in_one_line(
        cli_path: str, args: list[str]) -> None:
    done = subprocess.run([cli_path, "prepare", *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "nosuch" in done.stderr or "local" in done.stderr
