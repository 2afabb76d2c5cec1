"""The structure a contributor relies on: frameworks are reached through the registry (an
import-linter contract that fails on a direct import), names of frameworks branch inside
``backends/`` only, and a ``model_uri`` is read in one place."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "mlflow_dlaas"
CONTRACT = "Inference and workloads reach a framework or runtime only through the registry"
#: A framework, runtime or file-kind name, quoted, where a line compares or tests for it.
NAME_BRANCH = re.compile(
    r"(==|!=|\bin\b|\bif\b|\belif\b|\bcase\b)[^#]*[\"'](pytorch|torch|tensorflow|keras|mxnet|"
    r"onnxruntime|openvino|onnx|torchscript|torch_export|torch_pickle|savedmodel)[\"']")
MAX_NAME_BRANCHES = 6


def source_lines(outside: str) -> list[tuple[Path, str]]:
    return [(path, line) for path in sorted(PACKAGE.rglob("*.py"))
            if outside not in path.relative_to(PACKAGE).parts
            for line in path.read_text().splitlines()]


def test_framework_names_branch_inside_backends_only() -> None:
    found = [f"{path.relative_to(ROOT)}: {line.strip()}"
             for path, line in source_lines("backends") if NAME_BRANCH.search(line)]
    assert len(found) <= MAX_NAME_BRANCHES, "\n".join(found)


def test_a_model_uri_is_parsed_in_one_place() -> None:
    calls = [path.name for path, line in source_lines("backends")
             if "parse_model_uri(" in line and "def parse_model_uri" not in line]
    assert calls == ["config.py"], calls


def _lint(copy: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over ``copy`` (a copy of the package and pyproject.toml)."""
    return subprocess.run(["lint-imports", "--no-cache"], cwd=copy, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(copy)}, text=True, timeout=300)


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """A copy of the package that keeps every contract, to plant a bad import in."""
    if shutil.which("lint-imports") is None:
        pytest.skip("import-linter not installed")
    shutil.copytree(PACKAGE, tmp_path / "mlflow_dlaas",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    kept = _lint(tmp_path)
    assert kept.returncode == 0 and "0 broken" in kept.stdout, kept.stdout[-2000:]
    return tmp_path


def _plant(copy: Path, module: str, line: str) -> None:
    path = copy / "mlflow_dlaas" / module
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_registry_contract_fails_on_a_direct_import(package_copy: Path) -> None:
    """A direct import of a backend from the inference package breaks the contract, and
    lint-imports names it."""
    _plant(package_copy, "inference/sources/load.py", "import mlflow_dlaas.backends.pytorch.fresh")
    broken = _lint(package_copy)
    assert broken.returncode != 0
    assert f"{CONTRACT} BROKEN" in broken.stdout
    assert "mlflow_dlaas.inference.sources.load -> mlflow_dlaas.backends.pytorch.fresh" in (
        broken.stdout)


def test_a_circle_inside_one_layer_fails_lint(package_copy: Path) -> None:
    """The layers contract cannot see a circle between two modules of one layer (``goals``
    imports ``schema``; ``schema`` importing ``goals`` back): the acyclic contract does."""
    _plant(package_copy, "runs/schema.py", "import mlflow_dlaas.runs.goals")
    broken = _lint(package_copy)
    assert broken.returncode != 0
    assert "No circles: no module or package imports, through its siblings, back into " \
           "itself" in broken.stdout
    assert "No cycles are allowed in mlflow_dlaas.runs." in broken.stdout


def _imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    return found | {node.module or "" for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.level == 0}


def test_what_a_run_says_imports_nothing_of_ours_but_errors() -> None:
    ours = {name for path in (PACKAGE / "runs").glob("*.py") for name in _imports_of(path)
            if name.startswith("mlflow_dlaas")}
    assert {n for n in ours if not n.startswith("mlflow_dlaas.runs")} <= {"mlflow_dlaas.errors"}


def test_the_architecture_picture_names_the_contracts_layers() -> None:
    """docs/architecture.md's layer picture and pyproject's layers contract, name for name
    and in order."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    contract = [[name.strip().removeprefix("mlflow_dlaas.") for name in layer.split("|")]
                for layer in layers]
    text = (ROOT / "docs" / "architecture.md").read_text()
    picture = text.split("```text\n", 1)[1].split("```", 1)[0]
    drawn = [[name.strip() for name in line.split("  ")[0].split("|")]
             for line in picture.splitlines() if line and not line.startswith(" ")]
    assert drawn == contract


#: the test suite's own helpers that stay at its root (every test lives in a folder named
#: after the part of the package it tests)
ROOT_FILES = {"__init__.py", "conftest.py", "busy.py", "legibility.py", "postgres.py"}
#: a module past this many lines holds more than one job
MAX_MODULE_LINES = 500


def test_tests_mirror_the_package() -> None:
    tests = ROOT / "tests"
    assert {p.name for p in tests.glob("*.py")} <= ROOT_FILES
    folders = {p.name for p in tests.iterdir() if (p / "__init__.py").is_file()}
    package = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    # beyond the package's own packages: the command line, the product as a whole, and the
    # environment (fingerprint, hardware, ceilings)
    assert folders - package <= {"cli", "project", "environment"}


def test_no_module_holds_more_than_one_jobs_worth_of_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, long


def test_the_report_reads_where_a_model_came_from_from_its_tag() -> None:
    """The model source's kind is the run's ``dlaas.model_source`` tag: no module of the
    report guesses it from the shape of ``model_uri``."""
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((PACKAGE / "report").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if "runs:/" in line]
    assert not found, found
