"""Resource plots on runs as they are logged, including the shortest ones."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pandas as pd

from mlflow_dlaas.report.resource_plots import timelines


def test_a_run_too_short_for_a_cpu_rate_still_gets_its_timeline(tracking: str,
                                                                 tmp_path: Path) -> None:
    """`monitor -- true` samples twice: memory, but no CPU % column in its timeline."""
    (tmp_path / "timeline.csv").write_text("t_s,proc_rss_bytes\n0.0,1048576\n0.05,2097152\n")
    (tmp_path / "summary.json").write_text(json.dumps({"phases": []}))
    with mlflow.start_run(run_name="short") as run:
        mlflow.log_artifacts(str(tmp_path), "monitor")
    runs = pd.DataFrame([{"run_id": run.info.run_id, "run_name": "short", "entry": "monitor",
                          "system": "true", "start_time": run.info.start_time}])
    plot = timelines(mlflow.MlflowClient(), runs)
    assert plot.missing is None and plot.png
