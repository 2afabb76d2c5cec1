"""What a timing test measures of the machine it shares: the CPU other processes used while
it ran, so that a test that needs quiet can say why it skipped instead of failing."""

from __future__ import annotations

import time

import psutil


class OtherProcessesCpu:
    """The CPU other processes used while the block ran, in cores (the machine's busy time
    less this process tree's)."""

    def __enter__(self) -> OtherProcessesCpu:
        self._start = self._sample()
        return self

    def __exit__(self, *_: object) -> None:
        (wall0, busy0, own0), (wall1, busy1, own1) = self._start, self._sample()
        self.cores = max(0.0, (busy1 - busy0) - (own1 - own0)) / max(wall1 - wall0, 1e-9)

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        times = psutil.cpu_times()
        own = psutil.Process().cpu_times()
        return (time.monotonic(), sum(times) - times.idle - getattr(times, "iowait", 0.0),
                own.user + own.system + own.children_user + own.children_system)
