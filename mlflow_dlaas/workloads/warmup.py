"""The unmeasured warm-up before training is timed: step by step until the step times
settle (two in a row within :data:`SETTLED` of each other, after the first step's one-time
costs), at most ``max_steps``, and no longer than a time budget, whatever a step costs."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mlflow_dlaas.backends import Trainer

#: Two consecutive step times this close (relative) mean the steps have settled.
SETTLED = 0.2


@dataclass(frozen=True)
class Warmup:
    steps: int
    seconds: float
    why: str  # "settled", "at most N steps", "time budget"


def settled(times: list[float]) -> bool:
    """Whether the last two step times, after the first step, agree within :data:`SETTLED`."""
    return len(times) >= 3 and abs(times[-1] - times[-2]) <= SETTLED * times[-2]


def warm_up(trainer: Trainer, x: np.ndarray, y: np.ndarray, order: np.ndarray, batch_size: int,
            max_steps: int, budget_s: float,
            clock: Callable[[], float] = time.perf_counter) -> Warmup:
    """Train one batch at a time (cycling through ``order``) until settled, ``max_steps``
    or ``budget_s`` seconds."""
    times: list[float] = []
    why = f"at most {max_steps} steps"
    for step in range(max_steps):
        part = np.take(order, range(step * batch_size, (step + 1) * batch_size), mode="wrap")
        start = clock()
        trainer.train_steps(x[part], y[part], batch_size)
        times.append(clock() - start)
        if settled(times):
            why = "settled"
            break
        if sum(times) >= budget_s:
            why = f"time budget of {budget_s:g} s"
            break
    return Warmup(len(times), sum(times), why)
