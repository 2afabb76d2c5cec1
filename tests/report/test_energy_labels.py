"""Every energy figure says where it comes from: measured (RAPL, NVML) or estimated from CPU
time as an interval; a fake powercap tree makes a measured one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlflow_dlaas.monitor.rapl import RaplSampler
from mlflow_dlaas.report.derived import add_energy
from mlflow_dlaas.report.energy_estimate import (
    ESTIMATED_HIGH,
    ESTIMATED_LOW,
    PER_1000_HIGH,
    PER_1000_LOW,
    SOURCE_COLUMN,
    WATTS_PER_VCPU,
)
from mlflow_dlaas.report.tables import TRAINING_COLUMNS, comparison_table


def _fake_powercap(root: Path, microjoules: int) -> None:
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text(f"{microjoules}\n")
    (zone / "max_energy_range_uj").write_text(f"{2**32}\n")


def _runs(measured: float | None) -> pd.DataFrame:
    row = {"run_id": "r1", "system": "pytorch", "entry": "infer",
           "metrics.run/proc_cpu_seconds": 10.0,
           "metrics.offline/proc_cpu_seconds": 2.0,
           "metrics.offline/samples_total": 1000.0}
    if measured is not None:
        row["metrics.run/cpu_package0_energy_joules"] = measured
    return pd.DataFrame([row])


def test_a_fake_powercap_tree_gives_measured_energy_labelled_rapl(tmp_path: Path) -> None:
    _fake_powercap(tmp_path, 1_000_000)
    sampler = RaplSampler(tmp_path)
    sampler.open()
    _fake_powercap(tmp_path, 43_500_000)
    joules = sampler.collect()["cpu_package0_energy_joules"]
    assert joules == pytest.approx(42.5)
    runs = add_energy(_runs(joules))
    assert runs[SOURCE_COLUMN].tolist() == ["rapl"]
    assert runs["metrics.whole_run_energy_joules"].tolist() == [pytest.approx(42.5)]
    assert np.isnan(runs[f"metrics.{ESTIMATED_LOW}"].iloc[0])  # no estimate beside a measure


def test_without_a_counter_energy_is_an_interval_labelled_estimated() -> None:
    runs = add_energy(_runs(None))
    assert runs[SOURCE_COLUMN].tolist() == ["estimated"]
    assert np.isnan(runs["metrics.whole_run_energy_joules"].iloc[0])  # never as measured
    low, high = WATTS_PER_VCPU
    assert runs[f"metrics.{ESTIMATED_LOW}"].iloc[0] == pytest.approx(10.0 * low)
    assert runs[f"metrics.{ESTIMATED_HIGH}"].iloc[0] == pytest.approx(10.0 * high)
    # 2 CPU seconds for 1,000 offline samples
    assert runs[f"metrics.{PER_1000_LOW}"].iloc[0] == pytest.approx(2.0 * low)
    assert runs[f"metrics.{PER_1000_HIGH}"].iloc[0] == pytest.approx(2.0 * high)


def test_the_training_table_names_measured_and_estimated_energy_apart() -> None:
    runs = add_energy(_runs(None).assign(entry="train"))
    table = comparison_table("Training", runs, TRAINING_COLUMNS)
    assert "energy, whole run, measured (J)" in table.headings
    assert "energy, whole run, estimated from CPU time: low (J)" in table.headings
    assert any("estimated columns give an interval" in m for m in table.missing)
    assert not any("estimated from CPU time" in m for m in table.missing)
