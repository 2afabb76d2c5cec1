"""The machine's measured ceilings: a run faster than the nominal peak is held by them, they
are measured once per host and core count, and a disturbed calibration is not kept."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mlflow_dlaas import ceilings
from mlflow_dlaas.ceilings import CACHE_ENV, Ceilings, cached_ceilings, measure
from mlflow_dlaas.hardware import ASSUMED_FLAGS_VARIABLE, emulated_bf16_reason
from mlflow_dlaas.runs.schema import FRACTION_OF_PEAK, PEAK_GFLOPS
from mlflow_dlaas.workloads.peak import judge_peak

#: A 2-core Zen 4 VM: nominal 2 x 2596.1 MHz x 32 = 166.2 GFLOP/s; ONNX Runtime's ResNet-50
#: reached 178 GFLOP/s, torch.mm 180.
NOMINAL, ACHIEVED, MEASURED = 166.2, 178.0, 180.0


def test_a_run_faster_than_the_nominal_peak_is_held_by_the_measured_ceiling() -> None:
    figures, how = judge_peak(ACHIEVED, "fp32", Ceilings(2, {"fp32": MEASURED}, 20.0, "mm"),
                              NOMINAL)
    assert figures[PEAK_GFLOPS] == MEASURED
    assert 0.95 < figures[FRACTION_OF_PEAK] <= 1.05
    assert how.startswith("measured fp32 ceiling of 2 core(s): 180.0 GFLOP/s")
    figures, how = judge_peak(ACHIEVED, "fp32", None, NOMINAL)  # the nominal peak alone
    assert FRACTION_OF_PEAK not in figures and "measured low" in how
    figures, how = judge_peak(ACHIEVED, "int8", Ceilings(2, {"fp32": MEASURED}), NOMINAL)
    assert figures == {} and how == "no peak: no measured int8 ceiling here"


def test_the_ceilings_are_measured_on_the_cores_in_use() -> None:
    found = measure(1)
    assert found.cores == 1 and found.gflops["fp32"] > 1
    assert found.bandwidth_gb_per_s and found.bandwidth_gb_per_s > 0.5
    assert ("bf16" in found.gflops) == (not emulated_bf16_reason())


def test_the_calibration_is_kept_once_per_host_and_core_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    first = cached_ceilings(1)
    assert first is not None and first.gflops["fp32"] > 0
    (kept,) = (tmp_path / "ceilings").glob("*-1c*.json")
    started: list[list[str]] = []
    monkeypatch.setattr(ceilings.subprocess, "run",
                        lambda command, **_: started.append(command))
    assert cached_ceilings(1) == first and started == []  # the second run measures nothing
    kept.unlink()


def test_ceilings_measured_under_assumed_cpu_flags_are_kept_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run with another CPU's flags assumed (no bf16) never hands its ceilings (no bf16
    row) to the runs on the CPU as it is."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(ASSUMED_FLAGS_VARIABLE, "avx,avx2,fma")
    assumed = cached_ceilings(1)
    assert assumed is not None and "bf16" not in assumed.gflops
    monkeypatch.delenv(ASSUMED_FLAGS_VARIABLE)
    real = cached_ceilings(1)
    assert ("bf16" in real.gflops) == (not emulated_bf16_reason())
    assert len(list((tmp_path / "ceilings").glob("*-1c*.json"))) == 2


def test_a_disturbed_calibration_is_kept_and_measured_again_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a busy machine the cache keeps each figure's best, and measures again only after
    RETRY_DISTURBED_S: never before every run."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(ASSUMED_FLAGS_VARIABLE, "avx,avx2,fma")  # fp32 is all there is
    results = [Ceilings(2, {"fp32": 20.0}, 5.0, "busy", disturbed=True),
               Ceilings(2, {"fp32": 70.0}, 4.0, "quiet")]
    started: list[list[str]] = []

    def calibrate(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        started.append(command)
        return subprocess.CompletedProcess(command, 0, results.pop(0).to_json() + "\n", "")

    monkeypatch.setattr(ceilings.subprocess, "run", calibrate)
    assert cached_ceilings(2).gflops["fp32"] == 20.0
    assert cached_ceilings(2).disturbed and len(started) == 1  # kept, not measured again
    (kept,) = (tmp_path / "ceilings").glob("*-2c*.json")
    old = kept.stat().st_mtime - ceilings.RETRY_DISTURBED_S - 1
    os.utime(kept, (old, old))
    again = cached_ceilings(2)
    assert len(started) == 2 and again == Ceilings(2, {"fp32": 70.0}, 5.0, "quiet")


def test_a_cache_without_bf16_is_measured_again_where_bf16_can_be(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment without PyTorch (MXNet's) keeps fp32 alone; a run in one with
    PyTorch, on a CPU with native bf16, measures again rather than go without its bf16
    ceiling. On a CPU without, the kept figures stand."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(ASSUMED_FLAGS_VARIABLE, raising=False)  # the decision is faked below
    folder = tmp_path / "ceilings"
    folder.mkdir()
    fp32_only = Ceilings(1, {"fp32": 10.0}, 5.0, "numpy alone", False)
    calibrations: list[int] = []

    def calibrate(cores: int, affinity: object) -> Ceilings:
        calibrations.append(cores)
        return Ceilings(1, {"fp32": 12.0, "bf16": 30.0}, 5.0, "torch", False)

    monkeypatch.setattr(ceilings, "_calibrate", calibrate)
    for native, measured_again in (("", True), ("no native bf16", False)):
        monkeypatch.setattr(ceilings, "emulated_bf16_reason", lambda native=native: native)
        (folder / "host-1c.json").write_text(fp32_only.to_json())
        monkeypatch.setattr(ceilings, "fingerprint", lambda: {"host_hash": "host"})
        found = cached_ceilings(1)
        assert ("bf16" in found.gflops) == measured_again
        assert calibrations == ([1] if measured_again else [1])  # the first loop's one
