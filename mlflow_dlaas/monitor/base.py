"""The shape every sampler shares: open, collect, close."""

from __future__ import annotations

import abc
from typing import ClassVar

#: The shortest window a CPU percentage is read off: CPU times tick in 10 ms jiffies, so over
#: a phase-boundary sample's few milliseconds one tick reads as 1000 % (or none as 0 %).
#: A shorter window leaves the rate to the next sample.
MIN_CPU_WINDOW_S = 0.05


class Sampler(abc.ABC):
    """One measurement source. ``collect`` returns registered metric keys to values.

    Counters (see :mod:`mlflow_dlaas.monitor.metrics`) are reported as the increase since
    :meth:`open`, so every timeline starts at zero.
    """

    name: ClassVar[str]

    def open(self) -> None:  # noqa: B027 - optional hook
        """Acquire the source; raise :class:`~mlflow_dlaas.errors.SourceUnavailable` if absent."""

    @abc.abstractmethod
    def collect(self) -> dict[str, float]:
        """One reading of every metric this source provides."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the source."""
