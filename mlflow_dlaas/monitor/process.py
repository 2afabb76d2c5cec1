"""Resource use of one process and all its descendants."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import psutil

from mlflow_dlaas.errors import SourceUnavailable
from mlflow_dlaas.monitor.base import MIN_CPU_WINDOW_S, Sampler
from mlflow_dlaas.monitor.proc_files import read_counters
from mlflow_dlaas.runs.schema import (
    PROC_CPU_PERCENT,
    PROC_CPU_SECONDS,
    PROC_CTX_SWITCHES,
    PROC_HWM_RSS,
    PROC_IO_READ,
    PROC_IO_WRITE,
    PROC_PROCESSES,
    PROC_RSS,
    PROC_THREADS,
)


class ProcessTreeSampler(Sampler):
    """CPU, memory, threads, context switches and I/O of a process tree.

    CPU time counts reaped descendants exactly once: every live process contributes its own
    time plus that of the children it has reaped (``children_user/system``). Context switches
    and I/O add up the last value seen of every process that was ever in the tree.
    """

    name = "process"

    def __init__(self, pid: int, *, since_start: bool = False) -> None:
        """``since_start``: CPU time, context switches and I/O count from the processes'
        start rather than from :meth:`open`."""
        self.pid = pid
        self._since_start = since_start
        self._procs: list[int] = []
        self._last_seen: dict[tuple[int, int], tuple[int, int, int]] = {}
        self._cpu_base = 0.0
        self._cpu_total = 0.0
        self._counters_base = (0, 0, 0)
        self._prev: tuple[float, float] | None = None

    def open(self) -> None:
        if read_counters(self.pid) is None:
            raise SourceUnavailable(f"process {self.pid} does not exist")
        self._procs = [self.pid]
        self._cpu_total = self._read()[0]
        if not self._since_start:
            self._cpu_base = self._cpu_total
            self._counters_base = self._counter_sums()
        self._prev = (time.perf_counter(), self._cpu_total - self._cpu_base)

    def reset_high_water(self) -> None:
        """Restart the kernel's RSS high-water mark of every process in the tree (Linux
        ``clear_refs``), so that the next phase's peak is that phase's own."""
        for pid in self._procs:
            with contextlib.suppress(OSError):
                Path(f"/proc/{pid}/clear_refs").write_text("5")

    def pids(self) -> list[int]:
        """The pids in the tree at the last reading."""
        return list(self._procs)

    def collect(self) -> dict[str, float]:
        cpu, rss, hwm, threads, live = self._read()
        self._cpu_total = max(self._cpu_total, cpu)  # a child exiting unreaped dips briefly
        cpu_seconds = self._cpu_total - self._cpu_base
        ctx, read_b, write_b = (
            now - base for now, base in zip(self._counter_sums(), self._counters_base, strict=True)
        )
        values = {
            PROC_CPU_SECONDS: cpu_seconds,
            PROC_CTX_SWITCHES: float(ctx),
            PROC_IO_READ: float(read_b),
            PROC_IO_WRITE: float(write_b),
        }
        if live:  # after the tree has exited only the counters still mean something
            values[PROC_RSS] = float(rss)
            values[PROC_HWM_RSS] = float(hwm)
            values[PROC_THREADS] = float(threads)
            values[PROC_PROCESSES] = float(live)
        now = time.perf_counter()
        if now - self._prev[0] >= MIN_CPU_WINDOW_S:
            busy_s, wall_s = cpu_seconds - self._prev[1], now - self._prev[0]
            values[PROC_CPU_PERCENT] = 100.0 * busy_s / wall_s
            self._prev = (now, cpu_seconds)
        return values

    def _refresh_tree(self) -> list[int]:
        """The pids of the tree now: the root and its descendants."""
        self._procs = [self.pid, *_descendant_pids(self.pid)]
        return self._procs

    def _read(self) -> tuple[float, int, int, int, int]:
        """CPU seconds, RSS, largest high-water RSS, threads, live processes (neither zombie
        nor exiting: an exiting process has released its memory and reads 0 RSS)."""
        cpu = 0.0
        rss = hwm = threads = live = 0
        for pid in self._refresh_tree():
            found = read_counters(pid)
            if found is None:  # gone
                continue
            cpu += found.cpu_seconds
            if found.zombie or found.rss_bytes == 0:  # exiting: its memory is released
                continue
            live += 1
            rss += found.rss_bytes
            threads += found.threads
            self._last_seen[(pid, found.start_ticks)] = (
                found.context_switches, found.read_bytes, found.write_bytes)
            hwm = max(hwm, found.high_water_rss_bytes)
        return cpu, rss, hwm, threads, live

    def _counter_sums(self) -> tuple[int, int, int]:
        seen = self._last_seen.values()
        return (sum(s[0] for s in seen), sum(s[1] for s in seen), sum(s[2] for s in seen))


def _children_files_work() -> bool:
    me = os.getpid()
    return Path(f"/proc/{me}/task/{me}/children").exists()


_FAST_CHILDREN = _children_files_work()


def _descendant_pids(root: int) -> list[int]:
    """Every descendant of ``root``, through the children of each process's every thread.

    Linux's ``/proc/PID/task/TID/children`` walks only the tree (psutil's fallback reads the
    stat file of every process on the machine: about 5 ms a sample with 90 processes).
    """
    if not _FAST_CHILDREN:
        try:
            return [child.pid for child in psutil.Process(root).children(recursive=True)]
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return []
    found: list[int] = []
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except (OSError, ValueError):
                continue
            found.extend(kids)
            stack.extend(kids)
    return found
