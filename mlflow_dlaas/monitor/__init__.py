"""Run-scoped resource monitor: process tree, system, NVIDIA GPUs, RAPL energy."""

from mlflow_dlaas.monitor.base import Sampler
from mlflow_dlaas.monitor.resource_monitor import DEFAULT_INTERVAL_S, ResourceMonitor
from mlflow_dlaas.monitor.timeline import MonitorResult, PhaseWindow, Sample, Timeline

__all__ = [
    "DEFAULT_INTERVAL_S",
    "MonitorResult",
    "PhaseWindow",
    "ResourceMonitor",
    "Sample",
    "Sampler",
    "Timeline",
]
