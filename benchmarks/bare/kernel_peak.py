"""The kernel's peak RSS of a window of this process (Linux), for the bare scripts."""

from __future__ import annotations

import re


def restart_peak() -> None:
    """Restart the kernel's peak-RSS mark, so the next read is the window's own."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_rss_bytes() -> int:
    """The peak RSS since the process started or :func:`restart_peak`, in bytes."""
    with open("/proc/self/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) * 1024
