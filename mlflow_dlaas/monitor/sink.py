"""Writes a monitor's readings into an MLflow run: batched history, summaries, artifacts."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from mlflow import MlflowClient
from mlflow.entities import Metric, RunTag

from mlflow_dlaas.monitor.timeline import MonitorResult, Sample

TIMELINE_PREFIX = "monitor/"
MAX_BATCH = 1000  # MLflow's limit of metrics per log_batch call
ARTIFACT_DIR = "monitor"


class MlflowSink:
    """Buffers samples as metric history and logs them with ``log_batch``."""

    def __init__(self, run_id: str, client: MlflowClient | None = None) -> None:
        self.run_id = run_id
        self.client = client or MlflowClient()
        self._pending: list[Metric] = []

    def add(self, sample: Sample, step: int, start_wall_s: float) -> None:
        timestamp_ms = int((start_wall_s + sample.t_s) * 1000)
        self._pending.extend(
            Metric(TIMELINE_PREFIX + key, value, timestamp_ms, step)
            for key, value in sample.values.items()
        )

    def flush(self) -> None:
        while self._pending:
            chunk, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            self.client.log_batch(self.run_id, metrics=chunk)

    def finish(self, result: MonitorResult, interval_s: float) -> None:
        """Flush the history, then log summaries, source status and the raw timeline."""
        self.flush()
        metrics = dict(result.summary)
        metrics["monitor/probe_errors"] = float(result.probe_errors)
        metrics["monitor/self_cpu_seconds"] = result.monitor_cpu_seconds
        metrics["monitor/samples"] = float(len(result.timeline.samples))
        self._log_metrics(metrics)
        tags = {"dlaas.monitor.interval_s": str(interval_s)}
        for source, reason in result.unavailable.items():
            tags[f"dlaas.monitor.unavailable.{source}"] = reason[:500]
        self.client.log_batch(self.run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "timeline.csv").write_text(result.timeline.to_csv())
            Path(tmp, "summary.json").write_text(json.dumps(result.as_json(), indent=2))
            self.client.log_artifacts(self.run_id, tmp, ARTIFACT_DIR)

    def _log_metrics(self, metrics: dict[str, float]) -> None:
        """Log plain metrics (the summaries) in batches."""
        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
        for i in range(0, len(items), MAX_BATCH):
            self.client.log_batch(self.run_id, metrics=items[i : i + MAX_BATCH])

