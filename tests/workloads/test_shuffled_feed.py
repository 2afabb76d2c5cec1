"""A training epoch is fed in shuffled order without copying the whole training set."""

from __future__ import annotations

import numpy as np
import pytest

from mlflow_dlaas.backends import BuildOptions, StepStats, Trainer, get_framework
from mlflow_dlaas.data import load_dataset
from mlflow_dlaas.models import get_model
from mlflow_dlaas.workloads import shuffled_feed
from mlflow_dlaas.workloads.shuffled_feed import train_in_order


class _Recorder(Trainer):
    """Records what each call was given; trains nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, int]] = []

    def parameter_count(self) -> int:
        return 0

    def train_steps(self, x, y, batch_size, max_steps=None) -> StepStats:
        self.calls.append((y.copy(), x.nbytes))
        return StepStats(float(len(y)), 0, len(y), -(-len(y) // batch_size))

    def predict(self, x, batch_size):
        raise NotImplementedError

    def save_model(self, directory, example):
        raise NotImplementedError

    def export_onnx(self, path, example):
        raise NotImplementedError


def test_the_epoch_arrives_in_order_in_whole_batches_and_bounded_copies(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.zeros((1000, 3, 8, 8), dtype=np.float32)  # 768 bytes a sample
    y = np.arange(1000)
    order = np.random.default_rng(0).permutation(1000)
    monkeypatch.setattr(shuffled_feed, "GATHER_BYTES", 768 * 100)
    recorder = _Recorder()
    stats = train_in_order(recorder, x, y, order, batch_size=32)
    assert np.array_equal(np.concatenate([labels for labels, _ in recorder.calls]), order)
    assert all(nbytes <= 768 * 100 for _, nbytes in recorder.calls)
    assert all(len(labels) % 32 == 0 for labels, _ in recorder.calls[:-1])
    assert (stats.samples, stats.steps) == (1000, 32)

    recorder = _Recorder()
    stats = train_in_order(recorder, x, y, order, batch_size=32, max_steps=5)
    assert np.array_equal(np.concatenate([labels for labels, _ in recorder.calls]), order[:160])
    assert (stats.samples, stats.steps) == (160, 5)


def test_chunked_training_equals_training_on_the_shuffled_copy(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch", reason="the equivalence is checked on PyTorch (extra: torch)")
    data = load_dataset("digits")
    adapter = get_framework("pytorch")
    adapter.load()
    options = BuildOptions("sgd", 0.05, 0.9, 0.0, seed=0, device="cpu")
    order = np.random.default_rng(1).permutation(len(data.x_train))

    def trainer() -> Trainer:
        return adapter.build(get_model("mlp"), data.input_shape, data.num_classes, options)

    whole = trainer().train_steps(data.x_train[order], data.y_train[order], 16)
    monkeypatch.setattr(shuffled_feed, "GATHER_BYTES", data.x_train[:1].nbytes * 16 * 3)
    chunked = train_in_order(trainer(), data.x_train, data.y_train, order, 16)
    assert (chunked.samples, chunked.steps, chunked.correct) == (
        whole.samples, whole.steps, whole.correct)
    assert chunked.loss_sum == pytest.approx(whole.loss_sum, rel=1e-5)


def test_a_slow_epoch_says_where_it_is_every_ten_seconds() -> None:
    """3 s a step in one 16 MiB chunk used to say nothing until the epoch's end."""
    from mlflow_dlaas.workloads.progress import INTERVAL_S, Progress

    now = [0.0]

    class Slow(_Recorder):
        def train_steps(self, x, y, batch_size, max_steps=None) -> StepStats:
            now[0] += 3.0 * (-(-len(y) // batch_size))
            return super().train_steps(x, y, batch_size, max_steps)

    said: list[float] = []
    progress = Progress("train epoch 1", 40, clock=lambda: now[0],
                        say=lambda line: said.append(now[0]))
    x = np.zeros((40 * 8, 1, 2, 2), dtype=np.float32)  # all of it well within one chunk
    stats = train_in_order(Slow(), x, np.arange(len(x)), np.arange(len(x)), batch_size=8,
                           progress=progress, clock=lambda: now[0])
    assert stats.steps == 40
    gaps = np.diff([0.0, *said, now[0]])
    assert len(said) >= 10 and gaps.max() <= INTERVAL_S + 3.0, gaps
