"""The NVML sampler and the GPU part of the fingerprint, on a fake NVML."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pynvml
import pytest

from mlflow_dlaas.environment import gpu_info
from mlflow_dlaas.errors import SourceUnavailable
from mlflow_dlaas.monitor.nvml import NvmlSampler
from mlflow_dlaas.monitor.summary import summarize
from mlflow_dlaas.monitor.timeline import Sample, Timeline
from tests.monitor.fake_nvml import make_fake_nvml


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    nvml = make_fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml


def test_every_probe_is_read_per_gpu_with_units(fake) -> None:
    fake.nvmlDeviceGetComputeRunningProcesses.return_value = [
        SimpleNamespace(pid=11, usedGpuMemory=300), SimpleNamespace(pid=99, usedGpuMemory=5000),
        SimpleNamespace(pid=12, usedGpuMemory=None),
    ]
    sampler = NvmlSampler(lambda: [11, 12])
    sampler.open()
    values = sampler.collect()
    assert values["gpu0_utilization_percent"] == 75.0
    assert values["gpu1_memory_used_bytes"] == 2 * 2**30
    assert values["gpu0_power_watts"] == 250.0
    assert values["gpu0_temperature_celsius"] == 60.0
    assert values["gpu1_sm_clock_mhz"] == 1410.0
    assert values["gpu0_proc_memory_used_bytes"] == 300.0  # only the tree's processes
    assert values["gpu0_energy_joules"] == pytest.approx(1.0)  # counter since open
    assert sampler.collect()["gpu0_energy_joules"] == pytest.approx(2.0)
    sampler.close()
    fake.nvmlShutdown.assert_called_once()


def test_unsupported_probe_is_dropped_once_and_energy_comes_from_power(monkeypatch) -> None:
    nvml = make_fake_nvml(gpus=1, energy_supported=False)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    sampler = NvmlSampler()
    sampler.open()
    readings = [sampler.collect() for _ in range(3)]
    assert all("gpu0_energy_joules" not in r for r in readings)
    assert sampler.notes == {"gpu0_energy_joules": "not supported by this GPU"}
    assert nvml.nvmlDeviceGetTotalEnergyConsumption.call_count == 1
    timeline = Timeline(0.0, tuple(Sample(float(t), r) for t, r in enumerate(readings)), ())
    assert summarize(timeline)["run/gpu0_energy_joules"] == pytest.approx(500.0)


def test_other_nvml_errors_are_counted_not_raised(fake) -> None:
    fake.nvmlDeviceGetTemperature.side_effect = pynvml.NVMLError_Unknown()
    sampler = NvmlSampler()
    sampler.open()
    values = sampler.collect()
    assert "gpu0_temperature_celsius" not in values and "gpu0_power_watts" in values
    assert sampler.probe_errors == 2


def test_no_driver_means_unavailable(fake) -> None:
    fake.nvmlInit.side_effect = pynvml.NVMLError_LibraryNotFound()
    with pytest.raises(SourceUnavailable, match="no NVIDIA GPU"):
        NvmlSampler().open()
    assert gpu_info()["gpu_count"] == 0


def test_fingerprint_names_gpus_and_driver(fake) -> None:
    info = gpu_info()
    assert info["gpu_count"] == 2
    assert info["gpu_models"] == "Fake GPU 0, Fake GPU 1"
    assert info["gpu_driver"] == "999.1"
    assert info["gpu_cuda_driver"] == "13.0"
