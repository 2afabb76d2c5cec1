"""A long phase says where it is about every 10 s, never more than 10 s apart, and nothing
for a short one; the warm-up
ends when step times settle, or at its time budget, and says which."""

from __future__ import annotations

import numpy as np

from mlflow_dlaas.backends import StepStats
from mlflow_dlaas.workloads.progress import Progress
from mlflow_dlaas.workloads.warmup import settled, warm_up


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_long_phase_prints_lines_no_more_than_ten_seconds_apart() -> None:
    clock, lines, times = Clock(), [], []
    progress = Progress("train epoch 1", 120, clock=clock,
                        say=lambda line: (lines.append(line), times.append(clock.now)))
    for _ in range(120):  # 120 steps of 1.5 s: 180 s
        clock.now += 1.5
        progress.advance(1, 32)
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    assert all(5 <= gap <= 10 for gap in gaps), gaps  # the last step end before 10 s
    assert len(lines) == 20  # one per 9 s
    assert lines[0] == "train epoch 1: step 6/120, 21.3 samples/s, about 2 min 51 s left"
    slow, said_at = Clock(), []
    resnet = Progress("train epoch 1", 16, clock=slow, say=lambda _: said_at.append(slow.now))
    for _ in range(16):  # ResNet-50's 2.8 s steps on 2 cores
        slow.now += 2.8
        resnet.advance(1, 16)
    assert [round(t, 1) for t in said_at] == [8.4, 16.8, 25.2, 33.6, 42.0]
    quiet, said = Clock(), []
    short = Progress("train epoch 1", 5, clock=quiet, say=said.append)
    for _ in range(5):
        quiet.now += 1.0
        short.advance(1, 32)
    assert said == []


class TimedTrainer:
    """A trainer whose steps take the given times on ``clock``."""

    def __init__(self, clock: Clock, times: list[float]) -> None:
        self.clock, self.times = clock, list(times)

    def train_steps(self, x: np.ndarray, y: np.ndarray, batch_size: int) -> StepStats:
        self.clock.now += self.times.pop(0)
        return StepStats(0.0, 0, len(x), 1)


def test_the_warm_up_ends_when_step_times_settle_or_at_its_budget() -> None:
    x, y, order = np.zeros((10, 1)), np.zeros(10), np.arange(10)
    clock = Clock()
    quick = warm_up(TimedTrainer(clock, [0.9, 0.2, 0.11, 0.1, 0.1]), x, y, order, 4, 20, 30.0,
                    clock)
    assert (quick.steps, quick.why) == (4, "settled")
    slow = warm_up(TimedTrainer(clock, [20.0, 17.0, 17.0]), x, y, order, 4, 20, 30.0, clock)
    assert (slow.steps, slow.why, slow.seconds) == (2, "time budget of 30 s", 37.0)
    capped = warm_up(TimedTrainer(clock, [1.0, 2.0, 4.0]), x, y, order, 4, 3, 30.0, clock)
    assert (capped.steps, capped.why) == (3, "at most 3 steps")
    assert not settled([1.0, 0.1]) and settled([1.0, 0.1, 0.11])
