"""A served model's inputs: seeded synthetic samples (:func:`synthetic_feed`, checked against
the memory available first) or the user's own (:func:`file_feed`, an ``.npz``), and a
predictor fed in a model's fixed batch (:func:`in_batches`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mlflow_dlaas.backends.feed import Feed
from mlflow_dlaas.backends.served_model import InputSpec, UserModel
from mlflow_dlaas.errors import ConfigError

#: synthetic integer inputs (token ids, indices) are drawn from [0, INT_HIGH)
INT_HIGH = 10


def synthetic_feed(specs: Sequence[InputSpec], n: int, seed: int) -> Feed:
    """``n`` seeded samples per input: uniform [0, 1) floats, integers in [0, INT_HIGH).
    Their size is checked against the memory available before any is made."""
    check_inputs_fit_memory(specs, n)
    rng = np.random.default_rng(seed)
    arrays = {}
    for spec in specs:
        dtype = np.dtype(spec.dtype)
        shape = (n, *spec.shape)
        if dtype == np.bool_:
            arrays[spec.name] = rng.random(shape, dtype=np.float32) < 0.5
        elif np.issubdtype(dtype, np.integer):
            arrays[spec.name] = rng.integers(0, INT_HIGH, shape, dtype=np.int64).astype(dtype)
        elif dtype in (np.float32, np.float64):
            arrays[spec.name] = rng.random(shape, dtype=dtype)
        else:
            arrays[spec.name] = rng.random(shape, dtype=np.float32).astype(dtype)
    return Feed(arrays)


def check_inputs_fit_memory(specs: Sequence[InputSpec], n: int) -> None:
    """Refuse ``n`` samples of ``specs`` whose making would take more than half the memory
    available now (a model declaring 10^9 elements a sample asked for 30 GiB), naming the
    input that makes them large."""
    import psutil

    def sample_bytes(spec: InputSpec) -> int:
        return math.prod(spec.shape) * max(np.dtype(spec.dtype).itemsize, 8)  # the draw's

    need = n * sum(sample_bytes(s) for s in specs)
    available = psutil.virtual_memory().available
    if need > available / 2:
        largest = max(specs, key=sample_bytes)
        raise ConfigError(
            f"input {largest.name!r} declares {math.prod(largest.shape):,} elements a sample "
            f"({'x'.join(map(str, largest.shape))}); {n} samples need {need / 2**30:.1f} GiB, "
            f"more than half the {available / 2**30:.1f} GiB available: check the model's "
            "input shape, or give -P input_shape (and fewer samples)")


def file_feed(path: Path, specs: Sequence[InputSpec]) -> Feed:
    """Real samples from an ``.npz`` (one array per input name; one unnamed array for a model
    with one input), checked against the model's inputs."""
    try:
        with np.load(path) as found:
            arrays = {k: found[k] for k in found.files}
    except (OSError, ValueError) as e:
        raise ConfigError(f"input_data {path}: cannot read it as .npz ({e})") from None
    if len(specs) == 1 and len(arrays) == 1:
        arrays = {specs[0].name: next(iter(arrays.values()))}
    missing = [s.name for s in specs if s.name not in arrays]
    if missing:
        raise ConfigError(f"input_data {path} has no array for input(s) {', '.join(missing)} "
                          f"(it holds {', '.join(arrays) or 'nothing'})")
    feed = {}
    for spec in specs:
        array = arrays[spec.name]
        if tuple(array.shape[1:]) != spec.shape:
            raise ConfigError(f"input_data {path}: {spec.name} holds samples of shape "
                              f"{list(array.shape[1:])}, the model takes {list(spec.shape)}")
        feed[spec.name] = np.ascontiguousarray(array.astype(spec.dtype, copy=False))
    try:
        return Feed(feed)
    except ValueError as e:
        raise ConfigError(f"input_data {path}: {e}") from None


def inputs_for(user: UserModel, n: int, seed: int) -> Feed:
    """``n`` samples for the measured scenarios: the user's data (cycled) or synthetic."""
    if user.input_data is None:
        return synthetic_feed(user.inputs, n, seed)
    data = file_feed(user.input_data, user.inputs)
    return data[np.resize(np.arange(len(data)), n)]


def in_batches(predict: Callable[[Feed], np.ndarray], feed: Feed, step: int | None
               ) -> np.ndarray:
    """Outputs for every sample of ``feed``, in batches of ``step`` (a fixed-batch model)."""
    if not step or step == len(feed):
        return predict(feed)
    if len(feed) % step:
        feed = feed[np.resize(np.arange(len(feed)), -(-len(feed) // step) * step)]
    return np.concatenate([predict(feed[i : i + step]) for i in range(0, len(feed), step)])
