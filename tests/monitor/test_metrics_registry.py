"""Every key a sampler emits is registered with a unit."""

import os

import pytest

from mlflow_dlaas.monitor.metrics import Kind, is_counter, spec_of
from mlflow_dlaas.monitor.process import ProcessTreeSampler
from mlflow_dlaas.monitor.system import SystemSampler


@pytest.mark.parametrize("sampler", [ProcessTreeSampler(os.getpid()), SystemSampler()],
                         ids=lambda s: s.name)
def test_emitted_keys_are_registered(sampler) -> None:
    sampler.open()
    sampler.collect()
    for key in sampler.collect():
        assert spec_of(key).unit


def test_device_indices_match_and_units_are_in_names() -> None:
    assert spec_of("gpu3_power_watts").kind is Kind.GAUGE
    assert is_counter("cpu_package1_energy_joules")
    with pytest.raises(KeyError, match="not registered"):
        spec_of("gpu_power")
