"""The in-memory dataset every adapter trains on: NCHW float32 images, int64 labels."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Dataset:
    """Train and test arrays; images (N, C, H, W) float32 in [0, 1], labels (N,) int64."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    #: False for random data with random labels: a speed-and-memory workload, no accuracy
    measures_accuracy: bool = True

    @property
    def input_shape(self) -> tuple[int, int, int]:
        c, h, w = self.x_train.shape[1:]
        return (int(c), int(h), int(w))

    def describe(self) -> dict[str, int | str]:
        """Params that identify the data a run used."""
        c, h, w = self.input_shape
        return {"dataset": self.name, "train_samples": len(self.x_train),
                "test_samples": len(self.x_test), "input_shape": f"{c}x{h}x{w}",
                "num_classes": self.num_classes}

    def digest(self) -> str:
        """A short fingerprint of the arrays themselves (the same data, the same digest)."""
        sha = hashlib.sha256()
        for array in (self.x_train, self.y_train, self.x_test, self.y_test):
            sha.update(np.ascontiguousarray(array).data)
        return sha.hexdigest()[:12]

    def input_report(self, data_dir: str) -> dict[str, int | str]:
        """What the entry logs as the run's dataset input: name, digest, folder, shapes."""
        return {**self.describe(), "name": self.name, "digest": self.digest(),
                "data_dir": data_dir}


def from_arrays(
    name: str, images: np.ndarray, labels: np.ndarray, *, test_fraction: float, seed: int,
    scale: float,
) -> Dataset:
    """Split (N, C, H, W) ``images`` into train and test, stratified by label, fixed by ``seed``."""
    images = np.ascontiguousarray(images, dtype=np.float32) / np.float32(scale)
    labels = np.asarray(labels, dtype=np.int64)
    rng = np.random.default_rng(seed)
    test_idx = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        rng.shuffle(members)
        test_idx.extend(members[: int(round(len(members) * test_fraction))])
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[test_idx] = True
    train_idx = rng.permutation(np.flatnonzero(~is_test))
    test_sorted = np.flatnonzero(is_test)
    return Dataset(name, images[train_idx], labels[train_idx], images[test_sorted],
                   labels[test_sorted], int(labels.max()) + 1)
