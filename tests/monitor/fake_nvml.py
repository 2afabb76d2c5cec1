"""A fake NVML: an autospec of pynvml with real exception classes and two GPUs."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import pynvml


def make_fake_nvml(*, gpus: int = 2, energy_supported: bool = True) -> mock.MagicMock:
    """pynvml's API with GPUs that report fixed readings; energy counters advance 1 J per call."""
    fake = mock.create_autospec(pynvml, instance=False)
    for name in dir(pynvml):
        if name.startswith("NVMLError") or name.startswith("NVML_"):
            setattr(fake, name, getattr(pynvml, name))
    fake.nvmlDeviceGetCount.return_value = gpus
    fake.nvmlDeviceGetHandleByIndex.side_effect = lambda i: f"handle{i}"
    fake.nvmlDeviceGetName.side_effect = lambda h: f"Fake GPU {h[-1]}"
    fake.nvmlSystemGetDriverVersion.return_value = "999.1"
    fake.nvmlSystemGetCudaDriverVersion.return_value = 13000
    fake.nvmlDeviceGetUtilizationRates.return_value = SimpleNamespace(gpu=75, memory=10)
    fake.nvmlDeviceGetMemoryInfo.return_value = SimpleNamespace(used=2 * 2**30, total=80 * 2**30)
    fake.nvmlDeviceGetPowerUsage.return_value = 250_000  # milliwatts
    fake.nvmlDeviceGetTemperature.return_value = 60
    fake.nvmlDeviceGetClockInfo.return_value = 1410
    counters = {}

    def energy(handle: str) -> int:
        if not energy_supported:
            raise pynvml.NVMLError_NotSupported()
        counters[handle] = counters.get(handle, 5_000_000) + 1000  # millijoules
        return counters[handle]

    fake.nvmlDeviceGetTotalEnergyConsumption.side_effect = energy
    fake.nvmlDeviceGetComputeRunningProcesses.return_value = []
    return fake
