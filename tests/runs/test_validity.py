"""The validity verdict from a monitor summary."""

from __future__ import annotations

import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.runs.validity import DISTURBED, VALID, ValidityThresholds, judge


def _summary(busy: float, tree: float, harness: float = 0.0, steal: float = 0.0,
             duration: float = 10.0, pressure: float = 0.0) -> dict[str, float]:
    return {"train/duration_seconds": duration, "train/sys_cpu_busy_seconds": busy,
            "train/proc_cpu_seconds": tree, "train/harness_cpu_seconds": harness,
            "train/sys_cpu_steal_seconds": steal,
            "train/peak_sys_memory_pressure_percent": pressure}


def test_a_quiet_phase_is_valid_and_says_how_quiet() -> None:
    verdict = judge(_summary(busy=20.5, tree=20.0), ("train",), 2, ValidityThresholds())
    assert verdict.status == VALID
    assert "0.05 of 2 cores" in verdict.reason


def test_other_processes_make_a_run_disturbed_with_how_much() -> None:
    verdict = judge(_summary(busy=29.0, tree=20.0), ("train",), 2, ValidityThresholds())
    assert verdict.status == DISTURBED
    assert "other processes used 0.90 of 2 cores during train" in verdict.reason


def test_the_harness_own_cpu_is_not_counted_as_other_processes() -> None:
    verdict = judge(_summary(busy=23.0, tree=20.0, harness=2.5), ("train",), 2,
                    ValidityThresholds())
    assert verdict.status == VALID
    assert verdict.figures["train/harness_cpu_cores"] == pytest.approx(0.25)


def test_steal_and_memory_pressure_disturb_a_run() -> None:
    stolen = judge(_summary(busy=20, tree=20, steal=2.0), ("train",), 2, ValidityThresholds())
    assert stolen.status == DISTURBED and "stole 10.0 %" in stolen.reason
    pressed = judge(_summary(busy=20, tree=20, pressure=30), ("train",), 2, ValidityThresholds())
    assert pressed.status == DISTURBED and "memory pressure" in pressed.reason


def test_thresholds_are_configurable_and_validated() -> None:
    lenient = ValidityThresholds(validity_max_other_cores=1.0)
    assert judge(_summary(busy=29.0, tree=20.0), ("train",), 2, lenient).status == VALID
    params = {"validity_max_other_cores": "0.5", "epochs": "1"}
    assert ValidityThresholds.pop_from(params).validity_max_other_cores == 0.5
    assert params == {"epochs": "1"}
    with pytest.raises(ConfigError, match="validity_max_steal_fraction"):
        ValidityThresholds.pop_from({"validity_max_steal_fraction": "nan"})


def test_no_measured_phase_is_not_a_valid_run() -> None:
    assert judge({}, ("train",), 2, ValidityThresholds()).status == DISTURBED


def test_measured_phases_too_short_to_judge_are_judged_by_the_whole_run() -> None:
    """A 2 ms phase holding a few 10 ms CPU ticks would read as tens of cores."""
    summary = {"test/duration_seconds": 0.002, "test/sys_cpu_busy_seconds": 0.05,
               "test/proc_cpu_seconds": 0.0, **{k.replace("train/", "run/"): v for k, v in
                                                _summary(busy=6.05, tree=6.0, duration=6.0)
                                                .items()}}
    verdict = judge(summary, ("test",), 2, ValidityThresholds())
    assert verdict.status == VALID, verdict.reason
    assert "(during run)" in verdict.reason and "0.00 s in all" in verdict.reason
    summary["run/sys_cpu_busy_seconds"] = 12.0  # someone else used a core all along
    assert judge(summary, ("test",), 2, ValidityThresholds()).status == DISTURBED
    del summary["run/duration_seconds"]  # no whole-run window: the short phase is all there is
    assert judge(summary, ("test",), 2, ValidityThresholds()).status == DISTURBED


def test_the_whole_run_is_judged_over_the_span_the_monitor_sampled() -> None:
    """A measured tree's CPU counts from its start (4 s of it before the first sample), the
    machine's from the first sample: held against each other, 1.5 cores of other processes
    would vanish."""
    summary = {"test/duration_seconds": 0.1, "test/sys_cpu_busy_seconds": 0.2,
               "test/proc_cpu_seconds": 0.2,
               "run/duration_seconds": 4.0, "run/sys_cpu_busy_seconds": 10.0,
               "run/proc_cpu_seconds": 8.0,
               "run/monitored_duration_seconds": 4.0, "run/monitored_sys_cpu_busy_seconds": 10.0,
               "run/monitored_proc_cpu_seconds": 4.0}
    verdict = judge(summary, ("test",), 2, ValidityThresholds())
    assert verdict.status == DISTURBED, verdict.reason
    assert "other processes used 1.50 of 2 cores during run" in verdict.reason
