"""Several named model inputs that share the batch dimension, sliced like one array.

A model with one input is fed a plain ``numpy`` array; a model with several (token ids and
an attention mask, an image and its size) is fed a :class:`Feed`, which the scenarios slice
exactly as they slice an array: ``feed[:8]`` is the first 8 samples of every input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


class Feed:
    """Named arrays with the same first (batch) dimension."""

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        if not arrays:
            raise ValueError("a feed needs at least one input")
        sizes = {len(a) for a in arrays.values()}
        if len(sizes) != 1:
            raise ValueError(f"inputs of one feed must share the batch size, got "
                             f"{ {k: len(a) for k, a in arrays.items()} }")
        self.arrays = dict(arrays)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return self.arrays[key]
        return Feed({k: a[key] for k, a in self.arrays.items()})

    def __len__(self) -> int:  # the batch size, as len() of an array
        return len(next(iter(self.arrays.values())))

    def __repr__(self) -> str:
        return "Feed(" + ", ".join(f"{k}: {a.dtype}{list(a.shape)}"
                                   for k, a in self.arrays.items()) + ")"
