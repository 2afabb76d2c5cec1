"""Per-phase summaries from a hand-made timeline."""

import pytest

from mlflow_dlaas.monitor.summary import summarize
from mlflow_dlaas.monitor.timeline import PhaseWindow, Sample, Timeline


def _timeline() -> Timeline:
    samples = tuple(
        Sample(t, {"proc_cpu_seconds": 0.5 * t, "proc_rss_bytes": 100.0 * (1 + t),
                   "gpu0_power_watts": 50.0})
        for t in (0.0, 1.0, 2.0, 3.0, 4.0)
    )
    phases = (PhaseWindow("epoch", 1.0, 2.0), PhaseWindow("epoch", 3.0, 4.0),
              PhaseWindow("warmup", 0.0, 1.0))
    return Timeline(start_wall_s=1000.0, samples=samples, phases=phases)


def test_counters_increase_per_phase_and_repeated_windows_pool() -> None:
    s = summarize(_timeline())
    assert s["run/proc_cpu_seconds"] == pytest.approx(2.0)
    assert s["epoch/proc_cpu_seconds"] == pytest.approx(1.0)
    assert s["epoch/duration_seconds"] == pytest.approx(2.0)
    assert s["warmup/proc_cpu_seconds"] == pytest.approx(0.5)


def test_gauges_get_peak_mean_p95_within_their_windows() -> None:
    s = summarize(_timeline())
    assert s["run/peak_proc_rss_bytes"] == 500.0
    assert s["warmup/peak_proc_rss_bytes"] == 200.0
    assert s["epoch/mean_proc_rss_bytes"] == pytest.approx((200 + 300 + 400 + 500) / 4)
    assert s["run/p95_proc_rss_bytes"] == pytest.approx(480.0)


def test_gpu_energy_is_integrated_from_power_without_a_counter() -> None:
    s = summarize(_timeline())
    assert s["run/gpu0_energy_joules"] == pytest.approx(200.0)
    assert s["epoch/gpu0_energy_joules"] == pytest.approx(100.0)


def test_timeline_csv_has_one_row_per_sample() -> None:
    rows = _timeline().to_csv().strip().splitlines()
    assert rows[0].split(",")[:4] == ["t_s", "wall_time_s", "phase", "proc_cpu_seconds"]
    assert len(rows) == 6
    # a sample on a boundary belongs to the phase that begins there
    assert [row.split(",")[2] for row in rows[1:]] == ["warmup", "epoch", "epoch", "epoch",
                                                       "epoch"]


def test_empty_timeline_gives_no_summary() -> None:
    assert summarize(Timeline(0.0, (), ())) == {}


def test_the_monitored_span_counts_only_from_the_first_sample() -> None:
    """A phase that began before the first sample takes a since-start counter whole; the
    monitored span, which the validity verdict reads, does not."""
    samples = tuple(Sample(t, {"proc_cpu_seconds": 3.0 + t, "sys_cpu_busy_seconds": 2 * t})
                    for t in (0.0, 1.0, 2.0))
    s = summarize(Timeline(start_wall_s=0.0, samples=samples,
                           phases=(PhaseWindow("load", -0.5, 2.0),)))
    assert s["run/proc_cpu_seconds"] == pytest.approx(5.0)
    assert s["run/monitored_proc_cpu_seconds"] == pytest.approx(2.0)
    assert s["run/monitored_sys_cpu_busy_seconds"] == pytest.approx(4.0)
    assert s["run/monitored_duration_seconds"] == pytest.approx(2.0)
