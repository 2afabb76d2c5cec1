"""A disk that fills during a run: one line, the run ended FAILED with the reason, no part of
a model left behind. The disk is a real 12 MiB tmpfs holding the store and its artifacts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, user_env

DISK_BYTES = 12 * 2**20
#: What is left free when the run starts: room for the run's first rows, not for its model.
LEFT_FREE_BYTES = 300 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A mounted 12 MiB tmpfs (root only: the suite runs as root here and in CI)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root and mount(8); run the suite as root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs",
                              str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_run_that_fills_the_disk_ends_failed_in_one_line(small_disk: Path) -> None:
    uri = f"sqlite:///{small_disk / 'mlflow.db'}"
    subprocess.run([sys.executable, "-c", f"import mlflow; mlflow.MlflowClient({uri!r})"
                    ".search_experiments()"], cwd=small_disk, check=True, capture_output=True,
                   timeout=300)  # in the disk's folder: experiment 0 keeps its artifacts there
    free = shutil.disk_usage(small_disk).free
    (small_disk / "ballast").write_bytes(b"\0" * (free - LEFT_FREE_BYTES))

    done = subprocess.run(
        ["mlflow", "run", str(ROOT / "projects" / "pytorch"), "-e", "train", "-P", "model=lenet5",
         "-P", "dataset=mnist5k", "-P", "epochs=1", "--env-manager", "local"],
        cwd=small_disk, env=user_env(small_disk), capture_output=True, text=True, timeout=600)
    (small_disk / "ballast").unlink()  # room to read the store back

    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    said = [line for line in done.stderr.splitlines() if "mlflow-dlaas train: error" in line]
    assert len(said) == 1 and "the disk is full" in said[0] and said[0].endswith(
        "its run ended FAILED"), done.stderr
    assert len(done.stderr.splitlines()) <= 8, done.stderr
    import mlflow

    (run,) = mlflow.MlflowClient(uri).search_runs(["0"])
    assert run.info.status == "FAILED"
    assert run.data.tags["dlaas.failure_reason"].startswith("the disk is full"), run.data.tags
    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    assert not (artifacts / "model").exists(), sorted(artifacts.rglob("*"))
