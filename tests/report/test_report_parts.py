"""A report is written part by part: a table that breaks the statistics contract cannot be
built, and a part that cannot be written is named while every other part is still written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from mlflow_dlaas.report.tables import ComparisonTable
from tests.report.conftest import Measured


def test_a_table_without_run_ids_cannot_be_built() -> None:
    stats = pd.DataFrame([{"system": "pytorch", "runs": 2}])
    with pytest.raises(ValueError, match=r"lack \['run_ids'\]"):
        ComparisonTable("Parallel libraries", ["system"], [["pytorch"]], [[""]], stats, [])


def test_a_table_whose_rows_do_not_match_its_headings_cannot_be_built() -> None:
    stats = pd.DataFrame([{"system": "pytorch", "runs": 1, "run_ids": ["a" * 32]}])
    with pytest.raises(ValueError, match="one cell and one hint per heading"):
        ComparisonTable("Training", ["system", "runs"], [["pytorch"]], [["", ""]], stats, [])


def test_a_part_that_cannot_be_written_is_named_and_the_rest_is_written(
        measured: Measured, cli_path: str, tmp_path: Path) -> None:
    out = tmp_path / "report"
    (out / "runs.csv").mkdir(parents=True)  # a folder where the run table goes
    done = subprocess.run([cli_path, "compare", "--experiment", measured.experiment,
                           "--output", str(out), "--no-run"], env=measured.env(),
                          cwd=measured.root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    (line,) = [line for line in done.stderr.splitlines() if "error" in line]
    assert line.startswith("mlflow-dlaas: error: the report in ") and "incomplete" in line
    assert "runs.csv: IsADirectoryError" in line
    for name in ("report.html", "report.md", "training_stats.csv", "inference_stats.csv"):
        assert (out / name).is_file(), name
    assert f"report: {out / 'report.html'}" in done.stdout
