"""An entry point whose launcher dies while it starts up stops itself: no orphan trains on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import mlflow
import psutil
import pytest

from tests.conftest import ROOT, runs_of

pytestmark = pytest.mark.slow


def test_an_entry_whose_launcher_died_during_its_start_up_stops(tracking: str) -> None:
    """The launcher (as a study driver does: it names itself in the entry's environment)
    starts the entry through projects/run_workload.py, as every MLproject does, and exits at
    once, before the entry has imported anything: by then the entry's parent is another
    process, and it must still see that its launcher is gone."""
    launcher = textwrap.dedent(f"""
        import os, subprocess, sys
        from mlflow_dlaas.store.ownership import launcher_environment
        os.environ.update(launcher_environment())
        child = subprocess.Popen([sys.executable, {str(ROOT / 'projects' / 'run_workload.py')!r},
                                  "mlflow_dlaas.workloads.train", "--framework", "pytorch",
                                  "--model", "mlp", "--dataset", "digits", "--epochs", "500"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(child.pid, flush=True)
    """)
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow.get_tracking_uri(),
           "MLFLOW_EXPERIMENT_NAME": tracking}
    done = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True,
                          env=env, timeout=60)
    entry = int(done.stdout.strip())
    deadline = time.monotonic() + 60
    while psutil.pid_exists(entry) and time.monotonic() < deadline:
        try:
            if psutil.Process(entry).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    alive = psutil.pid_exists(entry) and psutil.Process(entry).status() != psutil.STATUS_ZOMBIE
    if alive:
        psutil.Process(entry).kill()
    assert not alive, "the entry point trained on after its launcher died"
    assert all(r.info.status != "RUNNING" for r in runs_of(tracking))
