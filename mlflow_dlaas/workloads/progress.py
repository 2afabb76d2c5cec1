"""Progress of a long phase, so that a person can tell work from a hang: a line about every
:data:`INTERVAL_S`, never more than that apart while steps take a steady time (a line is
said at the last step end before the gap would pass it), never more often than every half
of it (``train epoch 1: step 40/120, 12.3 samples/s, about 1 min 5 s left``); nothing for a
phase shorter than that."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

INTERVAL_S = 10.0

log = logging.getLogger(__name__)


class Progress:
    """Counts the steps and samples of one phase; says where it is every ``interval_s``."""

    def __init__(self, what: str, total_steps: int | None, *, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic,
                 say: Callable[[str], None] = log.info) -> None:
        self.what, self.total, self.interval_s = what, total_steps, interval_s
        self.clock, self.say = clock, say
        self.start = self.last = self.previous = clock()
        self.steps = self.samples = 0

    def advance(self, steps: int, samples: int) -> None:
        """``steps`` more steps of ``samples`` samples are done."""
        self.steps += steps
        self.samples += samples
        now = self.clock()
        step_s, self.previous = now - self.previous, now
        since = now - self.last
        if since >= self.interval_s / 2 and since + step_s > self.interval_s:
            self.last = now
            self.say(self.line(now))

    def line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        of = f"/{self.total}" if self.total else ""
        text = (f"{self.what}: step {self.steps}{of}, "
                f"{self.samples / elapsed:.3g} samples/s")
        if self.total and self.steps:
            left = elapsed * (self.total - self.steps) / self.steps
            text += f", about {_duration(left)} left"
        return text


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"
