"""The worker reads the configuration its entry validated, typed, from the run's folder:
never its argv parsed again."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from mlflow_dlaas.measured_process.start import StartedWorker, WorkerLaunch
from tests.conftest import ROOT


def test_the_worker_gets_the_entrys_configuration_as_typed_json(tmp_path: Path) -> None:
    (tmp_path / "echo_worker.py").write_text(textwrap.dedent("""
        import json, sys
        from mlflow_dlaas.measured_process.channel import entry_config
        print(json.dumps({"config": entry_config(), "argv": sys.argv[1:]}), flush=True)
    """))
    config = {"batch_size": 64, "jit_compile": False, "learning_rate": 0.01,
              "precision": "bf16", "batch_sizes": "1,8"}
    launch = WorkerLaunch(module="echo_worker", config=config, cpu_affinity=None,
                          environment={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
                          measured_phases=(), headline_phases=(), monitor_interval_s=0.1,
                          stall_timeout_s=30)
    with StartedWorker(launch) as started:
        os.close(started.take_reports())
        out = started.proc.communicate(timeout=60)[0].decode()
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen == {"config": config, "argv": []}
