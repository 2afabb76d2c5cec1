"""Feed a trainer the epoch's shuffled order a few batches at a time: the gathered copy is
bounded by :data:`GATHER_BYTES`, not the size of the training set (for ResNet-50 on 256
synthetic images, a whole-epoch copy is 147 MiB, a run's largest avoidable allocation)."""

from __future__ import annotations

import numpy as np

from mlflow_dlaas.backends import StepStats, Trainer
from mlflow_dlaas.workloads.progress import Progress

#: At most this much of the training set is copied into batch order at once (whole batches;
#: at least one).
GATHER_BYTES = 16 * 2**20


def train_in_order(trainer: Trainer, x: np.ndarray, y: np.ndarray, order: np.ndarray,
                   batch_size: int, max_steps: int | None = None,
                   progress: Progress | None = None) -> StepStats:
    """Train on ``x[order]``, ``y[order]`` in batches of ``batch_size``, at most ``max_steps``,
    gathering a chunk of whole batches per :meth:`Trainer.train_steps` call; each chunk
    done is told to ``progress``."""
    sample_bytes = max(x[:1].nbytes, 1)
    chunk = max(GATHER_BYTES // (sample_bytes * batch_size), 1) * batch_size
    if max_steps is not None:
        order = order[: max_steps * batch_size]
    total = StepStats(0.0, 0, 0, 0)
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        stats = trainer.train_steps(x[part], y[part], batch_size)
        total = StepStats(total.loss_sum + stats.loss_sum, total.correct + stats.correct,
                          total.samples + stats.samples, total.steps + stats.steps)
        if progress is not None:
            progress.advance(stats.steps, stats.samples)
    return total
