"""CIFAR-10 from the standard python-batches directory (``cifar-10-batches-py``)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from mlflow_dlaas.data.dataset import Dataset
from mlflow_dlaas.errors import ConfigError

TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"


#: What a CIFAR-10 batch's pickle may name: numpy's arrays and dtypes (both module paths of
#: numpy 1 and 2), nothing that can run code.
ALLOWED_GLOBALS = frozenset({
    (module, name) for module in ("numpy.core.multiarray", "numpy._core.multiarray")
    for name in ("_reconstruct", "scalar")
} | {("numpy", "ndarray"), ("numpy", "dtype")})


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that admits numpy arrays, lists, dicts, bytes and numbers: a crafted
    batch that names anything else (``os.system``, ...) is refused before it runs."""

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(
                f"it names {module}.{name}, which a CIFAR-10 batch never holds (only numpy "
                "arrays, lists and numbers are read; nothing in it was run)")
        return super().find_class(module, name)


def read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 3, 32, 32) uint8 and labels of one pickled batch."""
    if not path.is_file():
        raise ConfigError(
            f"missing CIFAR-10 batch {path}; point data_dir at the extracted "
            f"cifar-10-batches-py folder ({', '.join(TRAIN_BATCHES)}, {TEST_BATCH})"
        )
    try:
        with path.open("rb") as f:
            batch = _ArraysOnly(f, encoding="bytes").load()
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        labels = np.asarray(batch[b"labels"], dtype=np.int64)
        images = data.reshape(-1, 3, 32, 32)
    except (pickle.UnpicklingError, KeyError, ValueError, EOFError, TypeError) as e:
        raise ConfigError(f"{path} is not a CIFAR-10 python batch: {e}") from e
    if len(images) != len(labels):
        raise ConfigError(f"{path} is corrupt: {len(images)} images, {len(labels)} labels")
    return images, labels


def load_cifar10(directory: Path) -> Dataset:
    """The five training batches and the test batch of ``directory``."""
    if not directory.is_dir():
        raise ConfigError(f"dataset cifar10: directory {directory} does not exist; "
                          f"pass -P data_dir=<the extracted cifar-10-batches-py folder>")
    train = [read_batch(directory / name) for name in TRAIN_BATCHES]
    x_test, y_test = read_batch(directory / TEST_BATCH)
    x_train = np.concatenate([x for x, _ in train]).astype(np.float32) / 255.0
    y_train = np.concatenate([y for _, y in train])
    return Dataset("cifar10", x_train, y_train, x_test.astype(np.float32) / 255.0, y_test, 10)
