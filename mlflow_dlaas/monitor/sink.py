"""Writes a monitor's readings into an MLflow run: ``system/`` histories for the UI's System
metrics tab, the curated per-phase summaries, and every figure in artifacts."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from mlflow import MlflowClient
from mlflow.entities import Metric, RunTag

from mlflow_dlaas.monitor.metrics import timeline_name
from mlflow_dlaas.monitor.timeline import MonitorResult, Sample
from mlflow_dlaas.monitor.timeline_plot import plot_timeline
from mlflow_dlaas.runs.curation import curated_phase_summary
from mlflow_dlaas.runs.schema import MONITOR_TAG

MAX_BATCH = 1000  # MLflow's limit of metrics per log_batch call
ARTIFACT_DIR = "monitor"


class MlflowSink:
    """Buffers samples as metric history and logs them with ``log_batch``."""

    def __init__(self, run_id: str, client: MlflowClient | None = None) -> None:
        self.run_id = run_id
        self.client = client or MlflowClient()
        self._pending: list[Metric] = []

    def add(self, sample: Sample, step: int, start_wall_s: float) -> None:
        """Queue the sample's UI series (step = sample number, timestamp = its wall time)."""
        timestamp_ms = int((start_wall_s + sample.t_s) * 1000)
        for key, value in sample.values.items():
            named = timeline_name(key)
            if named is not None:
                self._pending.append(Metric(named[0], value * named[1], timestamp_ms, step))

    def flush(self) -> None:
        """Log what is queued; a batch the store refused stays queued for the next flush."""
        while self._pending:
            chunk = self._pending[:MAX_BATCH]
            self.client.log_batch(self.run_id, metrics=chunk)
            del self._pending[:len(chunk)]

    def finish(self, result: MonitorResult, interval_s: float) -> None:
        """Flush the history, then log the curated summaries, source status, and the raw
        timeline, every statistic and a plot with the phases marked as artifacts."""
        self.flush()
        self._log_metrics({**curated_phase_summary(result.summary), **result.own_cost()})
        self.client.log_batch(self.run_id, tags=[RunTag(MONITOR_TAG, monitor_line(
            result, interval_s))])
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "timeline.csv").write_text(result.timeline.to_csv())
            Path(tmp, "summary.json").write_text(json.dumps(result.as_json(), indent=2))
            plot_timeline(result.timeline, Path(tmp, "timeline.png"))
            self.client.log_artifacts(self.run_id, tmp, ARTIFACT_DIR)

    def _log_metrics(self, metrics: dict[str, float]) -> None:
        """Log plain metrics (the summaries) in batches."""
        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
        for i in range(0, len(items), MAX_BATCH):
            self.client.log_batch(self.run_id, metrics=items[i : i + MAX_BATCH])


def monitor_line(result: MonitorResult, interval_s: float) -> str:
    """``sampled every 0.2 s; its own CPU 0.120 s in 410 samples, 0.15 % of one core; 2
    failed probe(s); not measured: rapl (...)``: the monitor's one tag (its whole account
    is ``monitor/summary.json``)."""
    parts = [f"sampled every {interval_s:g} s",
             f"its own CPU {result.monitor_cpu_seconds:.3f} s in "
             f"{len(result.timeline.samples)} samples, "
             f"{result.cpu_percent_of_one_core:.2f} % of one core"]
    if result.probe_errors:
        parts.append(f"{result.probe_errors} failed probe(s)")
    if result.unavailable:
        parts.append("not measured: " + "; ".join(f"{source} ({reason[:200]})" for source, reason
                                                  in sorted(result.unavailable.items())))
    return "; ".join(parts)[:5000]
