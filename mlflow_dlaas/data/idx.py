"""MNIST-style IDX files (plain or gzipped): MNIST and Fashion-MNIST."""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path

import numpy as np

from mlflow_dlaas.data.dataset import Dataset
from mlflow_dlaas.errors import ConfigError

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


#: The largest IDX file read (MNIST's training images are 47 MB): a header that promises
#: more is refused before anything is decompressed.
MAX_IDX_BYTES = 1 * 2**30
#: The most a gzipped IDX file may inflate (MNIST's images: 4.7x): a header that promises
#: more than this times the file's size is refused before anything is decompressed.
MAX_GZIP_RATIO = 100


def read_idx(path: Path) -> np.ndarray:
    """Parse one IDX file; a clear error when it is truncated, not IDX, or larger than its
    header says. The header is read first and the body only up to the size it states (a
    small .gz that inflates to gigabytes is refused, never held)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            magic = f.read(4)
            if len(magic) < 4 or magic[0] != 0 or magic[1] != 0 or magic[2] not in _DTYPES:
                raise ConfigError(f"{path} is not an IDX file (bad magic number)")
            ndim = magic[3]
            raw_dims = f.read(4 * ndim)
            if len(raw_dims) < 4 * ndim:
                raise ConfigError(f"{path} is corrupt: its header is cut short")
            dims = tuple(int.from_bytes(raw_dims[4 * i : 4 * i + 4], "big")
                         for i in range(ndim))
            dtype = np.dtype(_DTYPES[magic[2]])
            size = math.prod(dims) * dtype.itemsize
            if size > MAX_IDX_BYTES:
                raise ConfigError(f"{path}: its header says {dims} ({size} bytes), more than "
                                  f"the {MAX_IDX_BYTES} bytes an IDX file may hold here")
            _refuse_a_promise_the_file_cannot_keep(path, dims, size)
            body = f.read(size + 1)  # one byte more shows a file longer than its header
    except (OSError, EOFError, zlib.error) as e:  # unreadable, or a corrupt or cut .gz
        raise ConfigError(f"cannot read IDX file {path}: {e}; download it again") from None
    if len(body) != size:
        length = f"{4 + 4 * ndim + len(body)}" if len(body) <= size else "more"
        raise ConfigError(f"{path} is corrupt: header says {dims} ({4 + 4 * ndim + size} "
                          f"bytes), file has {length}")
    return np.frombuffer(body, dtype=dtype).reshape(dims)


def _refuse_a_promise_the_file_cannot_keep(path: Path, dims: tuple[int, ...], size: int
                                           ) -> None:
    """A gzipped file whose header promises more than :data:`MAX_GZIP_RATIO` times its own
    size (a decompression bomb), or a plain one shorter than its header says, is refused
    before its body is read."""
    on_disk = path.stat().st_size
    if path.suffix == ".gz" and size > on_disk * MAX_GZIP_RATIO:
        raise ConfigError(f"{path}: its header says {dims} ({size:,} bytes) from {on_disk:,} "
                          f"compressed bytes, more than {MAX_GZIP_RATIO}x: not a real IDX "
                          "file; download it again")
    if path.suffix != ".gz" and on_disk < size:
        raise ConfigError(f"{path} is corrupt: header says {dims} ({size:,} bytes of data), "
                          f"the file has {on_disk:,} bytes")


def _find(directory: Path, stem: str) -> Path:
    dotted = stem.replace("-idx", ".idx")  # some mirrors name them train-images.idx3-ubyte
    for name in (stem, stem + ".gz", dotted, dotted + ".gz"):
        if (directory / name).is_file():
            return directory / name
    raise ConfigError(
        f"missing {stem}[.gz] in {directory}; the directory must hold the four standard "
        f"IDX files: {', '.join(FILES.values())}"
    )


def load_idx_dataset(name: str, directory: Path) -> Dataset:
    """The four standard IDX files of ``directory`` as a Dataset (official train/test split)."""
    if not directory.is_dir():
        raise ConfigError(f"dataset {name}: directory {directory} does not exist; "
                          f"pass --data-dir / -P data_dir=<folder with the IDX files>")
    arrays = {key: read_idx(_find(directory, stem)) for key, stem in FILES.items()}
    for key, stem in FILES.items():
        want = 3 if key.startswith("x") else 1
        if arrays[key].ndim != want:
            raise ConfigError(f"{directory}: {stem} holds {arrays[key].ndim}-D data, IDX "
                              f"{'images' if want == 3 else 'labels'} are {want}-D; "
                              "check that the four files are not swapped or renamed")
    for split in ("train", "test"):
        if len(arrays[f"x_{split}"]) != len(arrays[f"y_{split}"]):
            raise ConfigError(f"{directory}: {split} images and labels differ in count")
    x_train = arrays["x_train"][:, None].astype(np.float32) / 255.0
    x_test = arrays["x_test"][:, None].astype(np.float32) / 255.0
    y_train = arrays["y_train"].astype(np.int64)
    return Dataset(name, x_train, y_train, x_test, arrays["y_test"].astype(np.int64),
                   int(max(y_train.max(), arrays["y_test"].max())) + 1)
