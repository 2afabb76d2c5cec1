"""NVIDIA GPUs through NVML: utilization, memory, power, energy, temperature, SM clock."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from mlflow_dlaas.errors import SourceUnavailable
from mlflow_dlaas.monitor.base import Sampler
from mlflow_dlaas.runs.schema import (
    GPU_ENERGY,
    GPU_MEMORY_USED,
    GPU_POWER,
    GPU_PROC_MEMORY_USED,
    GPU_SM_CLOCK,
    GPU_TEMPERATURE,
    GPU_UTILIZATION,
)

log = logging.getLogger(__name__)


class NvmlSampler(Sampler):
    """Every visible NVIDIA GPU; per-process memory for the pids ``tree_pids`` returns.

    A probe the GPU does not support is dropped once and named in :attr:`notes`; other
    NVML errors are counted in :attr:`probe_errors` and never stop the other probes.
    """

    name = "nvml"

    def __init__(self, tree_pids: Callable[[], list[int]] | None = None) -> None:
        self._tree_pids = tree_pids or (lambda: [])
        self._handles: list[Any] = []
        self._energy_base_mj: dict[int, int] = {}
        self._disabled: set[str] = set()
        self.notes: dict[str, str] = {}
        self.probe_errors = 0

    def open(self) -> None:
        try:
            import pynvml
        except ImportError as e:
            raise SourceUnavailable(
                "nvidia-ml-py is not installed (pip install 'mlflow-dlaas[nvidia]')"
            ) from e
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except pynvml.NVMLError as e:
            raise SourceUnavailable(f"no NVIDIA GPU: {e}") from e
        if not self._handles:
            pynvml.nvmlShutdown()
            raise SourceUnavailable("NVML found no GPU")
        for i, handle in enumerate(self._handles):
            base = self._probe(GPU_ENERGY.format(i=i), pynvml.nvmlDeviceGetTotalEnergyConsumption,
                               handle)
            if base is not None:
                self._energy_base_mj[i] = base

    def close(self) -> None:
        if self._handles:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._handles = []

    def collect(self) -> dict[str, float]:
        nvml = self._nvml
        pids = set(self._tree_pids())
        values: dict[str, float] = {}
        for i, h in enumerate(self._handles):
            util = self._probe(GPU_UTILIZATION.format(i=i), nvml.nvmlDeviceGetUtilizationRates, h)
            if util is not None:
                values[GPU_UTILIZATION.format(i=i)] = float(util.gpu)
            memory = self._probe(GPU_MEMORY_USED.format(i=i), nvml.nvmlDeviceGetMemoryInfo, h)
            if memory is not None:
                values[GPU_MEMORY_USED.format(i=i)] = float(memory.used)
            procs = self._probe(
                GPU_PROC_MEMORY_USED.format(i=i), nvml.nvmlDeviceGetComputeRunningProcesses, h
            )
            if procs is not None:
                values[GPU_PROC_MEMORY_USED.format(i=i)] = float(
                    sum(p.usedGpuMemory or 0 for p in procs if p.pid in pids)
                )
            power = self._probe(GPU_POWER.format(i=i), nvml.nvmlDeviceGetPowerUsage, h)
            if power is not None:
                values[GPU_POWER.format(i=i)] = power / 1000.0
            if i in self._energy_base_mj:
                energy = self._probe(
                    GPU_ENERGY.format(i=i), nvml.nvmlDeviceGetTotalEnergyConsumption, h
                )
                if energy is not None:
                    values[GPU_ENERGY.format(i=i)] = (energy - self._energy_base_mj[i]) / 1000.0
            temp = self._probe(
                GPU_TEMPERATURE.format(i=i), nvml.nvmlDeviceGetTemperature, h,
                nvml.NVML_TEMPERATURE_GPU,
            )
            if temp is not None:
                values[GPU_TEMPERATURE.format(i=i)] = float(temp)
            clock = self._probe(
                GPU_SM_CLOCK.format(i=i), nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM
            )
            if clock is not None:
                values[GPU_SM_CLOCK.format(i=i)] = float(clock)
        return values

    def _probe(self, key: str, call: Callable[..., Any], *args: Any) -> Any:
        if key in self._disabled:
            return None
        try:
            return call(*args)
        except self._nvml.NVMLError_NotSupported:
            self._disabled.add(key)
            self.notes[key] = "not supported by this GPU"
        except self._nvml.NVMLError as e:
            self.probe_errors += 1
            if self.probe_errors == 1:
                log.warning("NVML probe %s failed (%s); later failures are only counted", key, e)
        return None
