"""The process-tree sampler against real child processes."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time

import psutil
import pytest

from mlflow_dlaas.monitor.proc_files import read_counters
from mlflow_dlaas.monitor.process import ProcessTreeSampler

BURN = "import time\nt=time.process_time()\nwhile time.process_time()-t<{s}: pass\n"


def test_reaped_grandchildren_cpu_time_is_counted_once() -> None:
    # A parent that starts two CPU-burning children, reaps them, then sleeps.
    script = (
        "import subprocess, sys, time\n"
        f"code = {BURN.format(s=0.6)!r}\n"
        "ps = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(2)]\n"
        "[p.wait() for p in ps]\n"
        "time.sleep(0.8)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    sampler = ProcessTreeSampler(proc.pid)
    sampler.open()
    seen_processes = 0
    while proc.poll() is None:
        values = sampler.collect()
        seen_processes = max(seen_processes, int(values.get("proc_processes", 0)))
        time.sleep(0.05)
    assert seen_processes == 3
    cpu = values["proc_cpu_seconds"]
    assert 1.2 <= cpu <= 1.2 + 0.6  # two burns plus interpreter start-ups, never double


def test_memory_and_threads_of_a_live_tree() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "b = bytearray(150 * 2**20); import time; time.sleep(60)"]
    )
    try:  # on a busy machine the child may take seconds to start: it lives until killed
        sampler = ProcessTreeSampler(proc.pid)
        sampler.open()
        deadline = time.time() + 60
        rss = 0.0
        while time.time() < deadline and rss < 150 * 2**20:
            values = sampler.collect()
            rss = values.get("proc_rss_bytes", 0.0)
            time.sleep(0.05)
        assert rss >= 150 * 2**20
        assert values["proc_hwm_rss_bytes"] >= rss * 0.99
        assert values["proc_threads"] >= 1
    finally:
        proc.kill()
        proc.wait()


def test_vanished_root_is_a_clear_unavailable_source() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    from mlflow_dlaas.errors import SourceUnavailable

    with pytest.raises(SourceUnavailable, match="does not exist"):
        ProcessTreeSampler(proc.pid).open()


def test_cpu_percent_is_not_read_off_a_few_milliseconds() -> None:
    """Phase boundaries add samples milliseconds apart; one 10 ms CPU tick must not read 1000 %."""
    proc = subprocess.Popen([sys.executable, "-c", BURN.format(s=1.5)])
    try:
        sampler = ProcessTreeSampler(proc.pid)
        sampler.open()
        time.sleep(0.1)
        readings = []
        for _ in range(20):  # a boundary-like burst, then a regular interval
            readings.append(sampler.collect().get("proc_cpu_percent"))
            time.sleep(0.002)
        time.sleep(0.1)
        readings.append(sampler.collect().get("proc_cpu_percent"))
    finally:
        proc.kill()
        proc.wait()
    seen = [r for r in readings if r is not None]
    assert readings[-1] is not None and len(seen) < len(readings)
    assert max(seen) <= 100.0 * 1.25  # one busy thread, jiffy rounding at most 10 ms in 50


def test_an_exiting_tree_is_not_charted_as_zero_megabytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Between releasing its memory and becoming a zombie a process reads 0 RSS; the timeline
    must end with the last real reading, not drop to 0 MB."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    try:
        sampler = ProcessTreeSampler(proc.pid)
        sampler.open()
        time.sleep(0.5)  # the interpreter is up
        assert sampler.collect()["proc_rss_bytes"] > 1e6
        monkeypatch.setattr("mlflow_dlaas.monitor.process.read_counters",
                            lambda pid: dataclasses.replace(read_counters(pid), rss_bytes=0))
        values = sampler.collect()
    finally:
        proc.kill()
        proc.wait()
    assert "proc_rss_bytes" not in values and "proc_processes" not in values
    assert values["proc_cpu_seconds"] >= 0  # the counters still read


def test_machine_cpu_never_drops_to_zero_at_phase_boundaries() -> None:
    """A busy core beside samples milliseconds apart (phase edges) must not chart a 0 % dip:
    a window shorter than a few jiffies gives no machine CPU percentage at all."""
    from mlflow_dlaas.monitor.system import SystemSampler

    proc = subprocess.Popen([sys.executable, "-c", BURN.format(s=2.0)])
    try:
        time.sleep(0.2)
        sampler = SystemSampler()
        sampler.open()
        time.sleep(0.1)
        readings = []
        for _ in range(5):  # a regular sample, then a burst of boundary samples
            time.sleep(0.1)
            for _ in range(10):
                readings.append(sampler.collect().get("sys_cpu_percent"))
                time.sleep(0.002)
    finally:
        proc.kill()
        proc.wait()
    seen = [r for r in readings if r is not None]
    assert 5 <= len(seen) < len(readings)
    assert min(seen) > 100 / psutil.cpu_count() / 2  # the busy core is always in it
