"""Each projects/<framework> environment carries mlflow-dlaas's own dependencies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")

ROOT = Path(__file__).resolve().parents[1]
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
    from mlflow_dlaas.frameworks import BUILTIN
    from mlflow_dlaas.inference.runtimes import RUNTIMES

    assert set(BUILTIN) | set(RUNTIMES) <= set(PROJECTS)
