"""Dataset registry and the IDX / CIFAR-10 readers, on small files in those formats."""

from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from mlflow_dlaas.data import load_dataset
from mlflow_dlaas.data.idx import FILES, read_idx
from mlflow_dlaas.errors import ConfigError


def write_idx(path: Path, array: np.ndarray, *, gz: bool) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(d).to_bytes(4, "big") for d in array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)


def make_idx_dir(root: Path, *, gz: bool, n_train: int = 30, n_test: int = 10) -> Path:
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (n_train, 28, 28)),
        "y_train": np.arange(n_train) % 10,
        "x_test": rng.integers(0, 256, (n_test, 28, 28)),
        "y_test": np.arange(n_test) % 10,
    }
    root.mkdir(parents=True, exist_ok=True)
    for key, stem in FILES.items():
        write_idx(root / stem, arrays[key], gz=gz)
    return root


@pytest.mark.parametrize("gz", [False, True])
def test_idx_files_are_read_plain_or_gzipped(tmp_path: Path, gz: bool) -> None:
    directory = make_idx_dir(tmp_path / "mnist", gz=gz)
    data = load_dataset("fashion-mnist", data_dir=directory)
    assert data.x_train.shape == (30, 1, 28, 28) and data.x_train.dtype == np.float32
    assert data.x_train.min() >= 0.0 and data.x_train.max() <= 1.0
    assert list(data.y_test) == list(range(10))
    assert data.num_classes == 10


def test_corrupt_or_missing_idx_files_say_what_is_wrong(tmp_path: Path) -> None:
    directory = make_idx_dir(tmp_path / "mnist", gz=False)
    images = directory / FILES["x_test"]
    images.write_bytes(images.read_bytes()[:-100])
    with pytest.raises(ConfigError, match="corrupt"):
        load_dataset("mnist", data_dir=directory)
    images.write_bytes(b"not an idx file at all")
    with pytest.raises(ConfigError, match="not an IDX file"):
        load_dataset("mnist", data_dir=directory)
    images.unlink()
    with pytest.raises(ConfigError, match="missing t10k-images-idx3-ubyte"):
        load_dataset("mnist", data_dir=directory)
    with pytest.raises(ConfigError, match="does not exist"):
        load_dataset("mnist", data_dir=tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="pass data_dir"):
        load_dataset("mnist")


def test_a_gzip_bomb_is_refused_without_inflating_it(tmp_path: Path) -> None:
    """A gzip that inflates to 256 MiB behind a header promising 10 labels: only the
    promised 10 bytes and one more are ever read."""
    import resource

    bomb = tmp_path / "t10k-labels-idx1-ubyte.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(bytes([0, 0, 0x08, 1]) + (10).to_bytes(4, "big"))
        zeros = bytes(2**24)
        for _ in range(16):  # 256 MiB of zeros
            f.write(zeros)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError, match="is corrupt: header says \\(10,\\)"):
        read_idx(bomb)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB
    huge = tmp_path / "train-images-idx3-ubyte"
    huge.write_bytes(bytes([0, 0, 0x08, 3]) + b"".join(n.to_bytes(4, "big")
                                                        for n in (100_000, 1000, 1000)))
    with pytest.raises(ConfigError, match="more than the 1073741824 bytes"):
        read_idx(huge)


def test_a_header_promising_gigabytes_from_a_small_gzip_is_refused_unread(
        tmp_path: Path) -> None:
    """A 2 MB-class gzip whose header promises 2,551,020 images of 28 x 28 (2.0 GB) is
    refused from its header and its size, before anything is inflated."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for images, message in ((2_551_020, "more than the 1073741824 bytes an IDX file may"),
                            (1_000_000, "compressed bytes, more than 100x: not a real IDX")):
        bomb = tmp_path / f"{images}" / "train-images-idx3-ubyte.gz"
        bomb.parent.mkdir()
        with gzip.open(bomb, "wb", compresslevel=9) as f:
            f.write(bytes([0, 0, 0x08, 3]) + b"".join(n.to_bytes(4, "big")
                                                        for n in (images, 28, 28)))
            f.write(bytes(2**24))
        with pytest.raises(ConfigError, match=message):
            read_idx(bomb)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50 * 1024  # KiB
    short = tmp_path / "t10k-labels-idx1-ubyte"
    short.write_bytes(bytes([0, 0, 0x08, 1]) + (1000).to_bytes(4, "big") + bytes(10))
    with pytest.raises(ConfigError, match="header says .1000,. .1,000 bytes of data., the "
                                          "file has 18 bytes"):
        read_idx(short)


def write_cifar_dir(root: Path, per_batch: int = 6) -> Path:
    root.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 b"labels": list(np.arange(per_batch) % 10)}
        (root / name).write_bytes(pickle.dumps(batch))
    return root


def test_cifar10_batches_are_read_channels_first(tmp_path: Path) -> None:
    data = load_dataset("cifar10", data_dir=write_cifar_dir(tmp_path / "cifar-10-batches-py"))
    assert data.x_train.shape == (30, 3, 32, 32)
    assert data.x_test.shape == (6, 3, 32, 32)
    assert data.input_shape == (3, 32, 32)


def test_cifar10_missing_or_corrupt_batch(tmp_path: Path) -> None:
    directory = write_cifar_dir(tmp_path / "c")
    (directory / "data_batch_3").write_bytes(b"garbage")
    with pytest.raises(ConfigError, match="data_batch_3 is not a CIFAR-10 python batch"):
        load_dataset("cifar10", data_dir=directory)
    (directory / "data_batch_3").unlink()
    with pytest.raises(ConfigError, match="missing CIFAR-10 batch"):
        load_dataset("cifar10", data_dir=directory)


class _Payload:
    """A pickle that, loaded by plain ``pickle.load``, creates a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_cifar10_batch_runs_nothing(tmp_path: Path) -> None:
    directory = write_cifar_dir(tmp_path / "c")
    marker = tmp_path / "ran"
    (directory / "data_batch_2").write_bytes(pickle.dumps(
        {b"data": _Payload(marker), b"labels": [0]}))
    with pytest.raises(ConfigError, match=r"data_batch_2 is not a CIFAR-10 python batch: it "
                                          r"names posix\.system.*nothing in it was run"):
        load_dataset("cifar10", data_dir=directory)
    assert not marker.exists()


def test_embedded_default_is_real_mnist_with_a_fixed_stratified_split() -> None:
    a, b = load_dataset("mnist5k"), load_dataset("mnist5k", seed=5)
    assert len(a.x_train) == 4000 and len(a.x_test) == 1000
    assert np.array_equal(a.y_test, b.y_test)  # the split does not move with the run seed
    assert np.bincount(a.y_test).tolist() == [100] * 10
    assert a.x_train.shape[1:] == (1, 28, 28)


def test_digits_and_synthetic_load_offline() -> None:
    assert load_dataset("digits").input_shape == (1, 8, 8)
    assert load_dataset("synthetic").num_classes == 10


def test_unknown_dataset_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown dataset 'imagenet'.*mnist5k"):
        load_dataset("imagenet")


def test_corrupt_gzip_and_swapped_idx_files_are_one_line_errors(tmp_path: Path) -> None:
    directory = make_idx_dir(tmp_path / "mnist", gz=True)
    images = directory / (FILES["x_test"] + ".gz")
    packed = images.read_bytes()
    images.write_bytes(packed[:10] + bytes(b ^ 0xFF for b in packed[10:-8]) + packed[-8:])
    with pytest.raises(ConfigError, match="cannot read IDX file .*; download it again"):
        load_dataset("mnist", data_dir=directory)
    images.write_bytes(packed[: len(packed) // 2])  # cut short
    with pytest.raises(ConfigError, match="cannot read IDX file"):
        load_dataset("mnist", data_dir=directory)
    labels = directory / (FILES["y_test"] + ".gz")
    images.write_bytes(labels.read_bytes())  # labels where the images belong
    with pytest.raises(ConfigError, match="t10k-images-idx3-ubyte holds 1-D data"):
        load_dataset("mnist", data_dir=directory)
    huge = bytes([0, 0, 0x08, 3]) + (2**31).to_bytes(4, "big") * 3
    images.write_bytes(gzip.compress(huge))
    with pytest.raises(ConfigError, match="its header says .* more than the"):
        load_dataset("mnist", data_dir=directory)
