"""The main job on the embedded default: ``make demo`` / ``mlflow-dlaas demo``."""

from __future__ import annotations

import sys

import mlflow

from mlflow_dlaas.monitor import ResourceMonitor
from mlflow_dlaas.tracking import configure_tracking, ensure_experiment
from mlflow_dlaas.workloads.sample import run_sample

DEMO_EXPERIMENT = "dlaas-demo"


def run_demo(*, seconds: float = 3.0, interval_s: float = 0.1) -> str:
    """Run a monitored sample workload in a new run; returns the run id."""
    target = configure_tracking()
    experiment_id = ensure_experiment(DEMO_EXPERIMENT)
    with mlflow.start_run(experiment_id=experiment_id, run_name="sample-workload") as run:
        mlflow.log_params({"workload": "sample", "seconds": seconds})
        with ResourceMonitor(interval_s=interval_s) as monitor:
            outcome = run_sample(monitor, seconds=seconds)
        mlflow.log_metric("products", outcome["products"])
    summary = monitor.result.summary if monitor.result else {}
    print(
        f"demo run {run.info.run_id} in experiment {DEMO_EXPERIMENT!r}: "
        f"compute phase {summary.get('compute/duration_seconds', 0):.2f} s, "
        f"peak RSS {summary.get('run/peak_proc_rss_bytes', 0) / 2**20:.0f} MiB",
        file=sys.stderr,
    )
    print(f"to see it: {target.ui_command()}", file=sys.stderr)
    return run.info.run_id
