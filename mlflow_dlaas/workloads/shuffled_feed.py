"""Feed a trainer the epoch's shuffled order a few batches at a time: the gathered copy is
bounded by :data:`GATHER_BYTES`, not the size of the training set (for ResNet-50 on 256
synthetic images, a whole-epoch copy is 147 MiB, a run's largest avoidable allocation), and
each call is sized to take about :data:`CALL_S` once the first is timed, so that progress
is said every :data:`~mlflow_dlaas.workloads.progress.INTERVAL_S` whatever the chunking (a
46 s epoch in one 16 MiB chunk said nothing until its end)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from mlflow_dlaas.backends import StepStats, Trainer
from mlflow_dlaas.workloads.progress import INTERVAL_S, Progress

#: At most this much of the training set is copied into batch order at once (whole batches;
#: at least one).
GATHER_BYTES = 16 * 2**20
#: The first call's steps, which time a step; later calls take about :data:`CALL_S` each.
FIRST_STEPS = 1
CALL_S = INTERVAL_S / 4


def train_in_order(trainer: Trainer, x: np.ndarray, y: np.ndarray, order: np.ndarray,
                   batch_size: int, max_steps: int | None = None,
                   progress: Progress | None = None,
                   clock: Callable[[], float] = time.monotonic) -> StepStats:
    """Train on ``x[order]``, ``y[order]`` in batches of ``batch_size``, at most ``max_steps``,
    gathering a chunk of whole batches per :meth:`Trainer.train_steps` call (bounded in bytes
    and in time); each chunk done is told to ``progress``."""
    sample_bytes = max(x[:1].nbytes, 1)
    most = max(GATHER_BYTES // (sample_bytes * batch_size), 1)  # steps a call, by memory
    if max_steps is not None:
        order = order[: max_steps * batch_size]
    total = StepStats(0.0, 0, 0, 0)
    steps, start = min(most, FIRST_STEPS), 0
    while start < len(order):
        part = order[start : start + steps * batch_size]
        began = clock()
        stats = trainer.train_steps(x[part], y[part], batch_size)
        step_s = (clock() - began) / max(stats.steps, 1)
        start += len(part)
        total = StepStats(total.loss_sum + stats.loss_sum, total.correct + stats.correct,
                          total.samples + stats.samples, total.steps + stats.steps)
        if progress is not None:
            progress.advance(stats.steps, stats.samples)
        steps = max(1, min(most, int(CALL_S / step_s) if step_s > 0 else most))
    return total
