"""RAPL parsing on a fake powercap tree."""

from pathlib import Path

import pytest

from mlflow_dlaas.errors import SourceUnavailable
from mlflow_dlaas.monitor.rapl import RaplSampler


def _zone(root: Path, name: str, label: str, energy: int, max_range: int = 1000) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(label + "\n")
    (zone / "energy_uj").write_text(f"{energy}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_range}\n")
    return zone


def test_package_energy_accumulates_across_counter_wraparound(tmp_path: Path) -> None:
    pkg = _zone(tmp_path, "intel-rapl:0", "package-0", energy=900_000, max_range=999_999)
    _zone(tmp_path, "intel-rapl:0:0", "core", energy=5)
    sampler = RaplSampler(tmp_path)
    sampler.open()
    (pkg / "energy_uj").write_text("950000\n")
    assert sampler.collect() == {"cpu_package0_energy_joules": pytest.approx(0.05)}
    (pkg / "energy_uj").write_text("100000\n")  # wrapped: 50,000 to the top, +1, +100,000
    assert sampler.collect()["cpu_package0_energy_joules"] == pytest.approx(0.200000)


def test_two_packages_are_reported_apart(tmp_path: Path) -> None:
    _zone(tmp_path, "intel-rapl:0", "package-0", energy=0)
    one = _zone(tmp_path, "intel-rapl:1", "package-1", energy=0)
    sampler = RaplSampler(tmp_path)
    sampler.open()
    (one / "energy_uj").write_text("3000000\n")
    assert sampler.collect() == {"cpu_package0_energy_joules": 0.0,
                                 "cpu_package1_energy_joules": 3.0}


def test_absent_or_unreadable_rapl_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="no RAPL package zone"):
        RaplSampler(tmp_path / "missing").open()
    pkg = _zone(tmp_path, "intel-rapl:0", "package-0", energy=0)
    (pkg / "energy_uj").unlink()
    with pytest.raises(SourceUnavailable, match="not readable"):
        RaplSampler(tmp_path).open()
