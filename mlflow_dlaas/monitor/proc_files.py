"""One process's counters, read straight from Linux's ``/proc/PID/{stat,status,io}``.

Three reads a process a sample, where psutil's accessors made seven (and our peak-RSS read an
eighth): the monitor's own CPU is part of what a run pays for being measured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
#: 0-based positions in /proc/PID/stat after the ``(comm)`` field (proc(5): field n is n - 3)
STATE, UTIME, STIME, CUTIME, CSTIME, THREADS, START, RSS_PAGES = 0, 11, 12, 13, 14, 17, 19, 21


@dataclass(frozen=True)
class ProcessCounters:
    """What the sampler adds up for one process."""

    cpu_seconds: float  # its own and its reaped children's, user and system
    zombie: bool
    rss_bytes: int
    high_water_rss_bytes: int  # the kernel's peak RSS (VmHWM)
    threads: int
    context_switches: int  # voluntary and involuntary
    read_bytes: int  # rchar: what it read, from disk or cache
    write_bytes: int  # wchar
    start_ticks: int  # when it started, in clock ticks after boot: with the pid, its identity


def read_counters(pid: int) -> ProcessCounters | None:
    """The process's counters; None where it has gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        with open(f"/proc/{pid}/status", "rb") as f:
            status = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    ticks = sum(int(fields[i]) for i in (UTIME, STIME, CUTIME, CSTIME))
    found = _status_fields(status)
    read_b, write_b = _io_bytes(pid)
    return ProcessCounters(
        cpu_seconds=ticks / CLOCK_TICKS,
        zombie=fields[STATE] == b"Z",
        rss_bytes=int(fields[RSS_PAGES]) * PAGE_BYTES,
        high_water_rss_bytes=found.get(b"VmHWM", 0) * 1024,
        threads=int(fields[THREADS]),
        context_switches=(found.get(b"voluntary_ctxt_switches", 0)
                          + found.get(b"nonvoluntary_ctxt_switches", 0)),
        read_bytes=read_b,
        write_bytes=write_b,
        start_ticks=int(fields[START]),
    )


def _status_fields(status: bytes) -> dict[bytes, int]:
    """The whole-number fields of /proc/PID/status the sampler reads (kB for sizes)."""
    wanted = (b"VmHWM", b"voluntary_ctxt_switches", b"nonvoluntary_ctxt_switches")
    found = {}
    for line in status.splitlines():
        key, _, value = line.partition(b":")
        if key in wanted:
            found[key] = int(value.split()[0])
    return found


def _io_bytes(pid: int) -> tuple[int, int]:
    """(rchar, wchar) of /proc/PID/io; (0, 0) where it cannot be read (another user's)."""
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            io = f.read()
    except OSError:
        return 0, 0
    values = dict(line.split(b": ") for line in io.splitlines() if b": " in line)
    return int(values.get(b"rchar", 0)), int(values.get(b"wchar", 0))
