"""The in-process monitor: phases, MLflow history, faults that must not hurt the workload."""

from __future__ import annotations

import csv
import time
from collections.abc import Callable

import mlflow
import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.monitor import ResourceMonitor, Sampler
from tests.conftest import artifact_text


def matmul_burn(seconds: float, size: int = 256,
                clock: Callable[[], float] = time.perf_counter) -> None:
    """Busy the CPU with matrix products for ``seconds`` of ``clock`` (``time.process_time``:
    this process's CPU seconds, however busy the machine)."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((size, size))
    deadline = clock() + seconds
    while clock() < deadline:
        a = np.tanh(a @ a.T / size)


class Exploding(Sampler):
    name = "exploding"

    def collect(self) -> dict[str, float]:
        raise RuntimeError("probe broke")


class Counting(Sampler):
    name = "counting"

    def __init__(self) -> None:
        self.n = 0

    def collect(self) -> dict[str, float]:
        self.n += 1
        return {"proc_cpu_seconds": float(self.n)}


def test_phases_and_timeline_reach_the_run(tracking: str) -> None:
    with mlflow.start_run() as run, ResourceMonitor(interval_s=0.05) as monitor:
        with monitor.phase("idle"):
            time.sleep(0.2)
        with monitor.phase("train"):
            matmul_burn(0.6, size=256)
    client = mlflow.MlflowClient()
    metrics = client.get_run(run.info.run_id).data.metrics
    assert metrics["train/duration_seconds"] == pytest.approx(0.6, abs=0.15)
    assert metrics["train/proc_cpu_seconds"] > 0.3
    assert metrics["idle/proc_cpu_seconds"] < 0.1
    assert metrics["run/peak_proc_rss_megabytes"] > 10 * 2**20 / 1e6
    history = client.get_metric_history(run.info.run_id, "system/process_tree_rss_megabytes")
    assert len(history) >= 10  # 0.05 s sampling over ~0.8 s, plus phase boundaries
    steps = [m.step for m in history]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "monitor")}
    assert artifacts == {"monitor/timeline.csv", "monitor/summary.json", "monitor/timeline.png"}
    timeline = artifact_text(run.info.run_id, "monitor/timeline.csv")
    phases = {row["phase"] for row in csv.DictReader(timeline.splitlines())}
    assert {"idle", "train"} <= phases  # every sample names the phase it fell in
    # what the monitor spent itself: its CPU in its samples, a share of one core
    samples = metrics["monitor_samples"]
    assert samples == len(list(csv.DictReader(timeline.splitlines()))) >= 10
    assert 0 < metrics["monitor_cpu_seconds"] < metrics["run/proc_cpu_seconds"]
    tag = client.get_run(run.info.run_id).data.tags["dlaas.monitor"]
    assert f"its own CPU {metrics['monitor_cpu_seconds']:.3f} s in {int(samples)} samples" in tag
    assert "% of one core" in tag


def test_a_failing_probe_is_counted_and_the_rest_keeps_sampling() -> None:
    counting = Counting()
    monitor = ResourceMonitor(interval_s=0.02, samplers=[Exploding(), counting],
                              log_to_mlflow=False)
    with monitor:
        time.sleep(0.2)
    result = monitor.result
    assert result.probe_errors >= 5
    assert counting.n >= 5
    assert result.summary["run/proc_cpu_seconds"] == counting.n - 1


def test_absent_sources_are_reported_once_as_unavailable() -> None:
    with ResourceMonitor(interval_s=0.05, log_to_mlflow=False) as monitor:
        time.sleep(0.1)
    unavailable = monitor.result.unavailable
    assert "process" not in unavailable and "system" not in unavailable
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        assert "no NVIDIA GPU" in unavailable["nvml"] or "not installed" in unavailable["nvml"]


@pytest.mark.parametrize("interval", [0, -1.0, 0.001])
def test_bad_interval_is_refused(interval: float) -> None:
    with pytest.raises(ConfigError, match="interval"):
        ResourceMonitor(interval_s=interval, log_to_mlflow=False)


def test_monitor_outside_a_run_says_how_to_fix(tracking: str) -> None:
    with pytest.raises(ConfigError, match="mlflow.start_run"):
        ResourceMonitor(interval_s=0.1).start()


def test_a_phase_reported_from_before_the_monitor_started_keeps_its_true_span() -> None:
    """A training worker starts before its entry's monitor (their imports overlap): its load
    phase's edges arrive late, stamped with the worker's clock, and must be placed there."""
    began = time.time()
    time.sleep(0.3)
    ended = time.time()
    monitor = ResourceMonitor(interval_s=0.05, log_to_mlflow=False).start()
    monitor.begin_phase("load", at_wall_s=began)
    monitor.end_phase("load", at_wall_s=ended)
    monitor.begin_phase("train", at_wall_s=time.time())  # now: sampled at the edge
    matmul_burn(0.2, clock=time.process_time)  # a busy machine gives it 0.2 s of CPU too
    monitor.end_phase("train", at_wall_s=time.time())
    result = monitor.stop()
    load, train = result.timeline.phases
    assert load.start_s < load.end_s < 0 <= train.start_s
    assert result.summary["load/duration_seconds"] == pytest.approx(0.3, abs=0.05)
    assert result.summary["run/duration_seconds"] > result.summary["load/duration_seconds"] + \
        result.summary["train/duration_seconds"]
    assert result.summary["train/proc_cpu_seconds"] > 0.1
