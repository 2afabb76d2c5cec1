"""The structure a contributor relies on: frameworks are reached through the registry (an
import-linter contract that fails on a direct import), names of frameworks branch inside
``backends/`` only, and a ``model_uri`` is read in one place."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
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


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter not installed")
def test_the_registry_contract_fails_on_a_direct_import(tmp_path: Path) -> None:
    """The package as it is keeps the contract; a direct import of a backend from the
    inference package breaks it, and lint-imports names the contract."""
    shutil.copytree(PACKAGE, tmp_path / "mlflow_dlaas",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    environment = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def lint() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["lint-imports", "--no-cache"], cwd=tmp_path, env=environment,
                              capture_output=True, text=True, timeout=300)

    kept = lint()
    assert kept.returncode == 0 and f"{CONTRACT} KEPT" in kept.stdout, kept.stdout[-2000:]
    loader = tmp_path / "mlflow_dlaas" / "inference" / "sources" / "load.py"
    loader.write_text(loader.read_text() + "\nimport mlflow_dlaas.backends.pytorch.fresh\n")
    broken = lint()
    assert broken.returncode != 0
    assert f"{CONTRACT} BROKEN" in broken.stdout
    assert "mlflow_dlaas.inference.sources.load -> mlflow_dlaas.backends.pytorch.fresh" in (
        broken.stdout)
