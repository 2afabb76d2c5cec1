"""Latency and throughput results, built from raw samples (warm-up never included)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

CDF_POINTS = np.arange(101)


@dataclass(frozen=True)
class LatencyResult:
    """Percentiles from raw per-query latencies, in milliseconds."""

    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    stdev_ms: float
    count: int
    duration_s: float
    samples_per_query: int
    #: latency at percentiles 0, 1, ..., 100: the CDF, compact enough to log with the run
    cdf_ms: tuple[float, ...] = ()

    PERCENTILES: ClassVar[tuple[int, ...]] = (50, 90, 95, 99)

    @classmethod
    def from_samples(cls, latencies_ns: list[int] | np.ndarray, *, duration_s: float,
                     samples_per_query: int) -> LatencyResult:
        ms = np.asarray(latencies_ns, dtype=np.float64) / 1e6
        if ms.size == 0:
            raise ValueError("no latency samples")
        p50, p90, p95, p99 = np.percentile(ms, cls.PERCENTILES)
        return cls(float(p50), float(p90), float(p95), float(p99), float(ms.mean()),
                   float(ms.std(ddof=1)) if ms.size > 1 else 0.0, int(ms.size), duration_s,
                   samples_per_query, tuple(float(v) for v in np.percentile(ms, CDF_POINTS)))

    @property
    def samples(self) -> int:
        """Samples served in the measured part."""
        return self.count * self.samples_per_query

    @property
    def throughput_samples_per_s(self) -> float:
        return self.samples / self.duration_s if self.duration_s else 0.0

    def metrics(self, prefix: str) -> dict[str, float]:
        """``{prefix}/latency_p99_ms`` and friends."""
        return {
            f"{prefix}/latency_p50_ms": self.p50_ms,
            f"{prefix}/latency_p90_ms": self.p90_ms,
            f"{prefix}/latency_p95_ms": self.p95_ms,
            f"{prefix}/latency_p99_ms": self.p99_ms,
            f"{prefix}/latency_mean_ms": self.mean_ms,
            f"{prefix}/latency_stdev_ms": self.stdev_ms,
            f"{prefix}/query_count": float(self.count),
            # not duration_seconds: {phase}/duration_seconds is the monitor's whole phase
            f"{prefix}/measured_seconds": self.duration_s,
            f"{prefix}/throughput_samples_per_second": self.throughput_samples_per_s,
        }
