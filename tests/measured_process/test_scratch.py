"""Scratch folders of runs whose owner died (SIGKILL) are swept by the next run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mlflow_dlaas.measured_process.scratch import scratch_dir, sweep_dead_owners


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_only_folders_of_dead_owners_are_swept(tmp_path: Path) -> None:
    dead = tmp_path / f"dlaas-run-{_dead_pid()}-abc"
    (dead / "model").mkdir(parents=True)
    live = tmp_path / f"dlaas-run-{os.getpid()}-def"
    live.mkdir()
    other = tmp_path / "dlaas-report-x"
    other.mkdir()
    assert sweep_dead_owners(tmp_path) == [dead]
    assert not dead.exists() and live.exists() and other.exists()


def test_a_scratch_folder_names_its_owner_and_goes_when_done() -> None:
    with scratch_dir("run") as folder:
        assert Path(folder).name.startswith(f"dlaas-run-{os.getpid()}-")
    assert not Path(folder).exists()
