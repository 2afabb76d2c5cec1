"""A run's achieved GFLOP/s against the machine's ceiling, judged by the entry after its
worker has ended (so that calibrating never disturbs a measurement): the measured ceiling of
the run's precision on the cores it used (:mod:`mlflow_dlaas.ceilings`), the nominal peak
beside it, and the fraction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import mlflow

from mlflow_dlaas.ceilings import Ceilings, cached_ceilings, peak_for
from mlflow_dlaas.runs.schema import (
    CORES_IN_USE,
    FRACTION_OF_PEAK,
    MEMORY_BANDWIDTH,
    NOMINAL_PEAK_GFLOPS,
    PEAK_GFLOPS,
    PEAK_TAG,
)

#: A rate this far above the ceiling says the ceiling was measured low (a busy machine).
OVER_THE_CEILING = 1.05


def judge_peak(achieved_gflops: float, precision: str, ceilings: Ceilings | None,
               nominal_gflops: float | None) -> tuple[dict[str, float], str]:
    """(the figures to log, how the peak was found) for a run that achieved
    ``achieved_gflops`` at ``precision``."""
    peak, how = peak_for(precision, ceilings, nominal_gflops)
    figures: dict[str, float] = {}
    if ceilings is not None and ceilings.bandwidth_gb_per_s:
        figures[MEMORY_BANDWIDTH] = ceilings.bandwidth_gb_per_s
    if peak is None:
        return figures, how
    figures[PEAK_GFLOPS] = peak
    fraction = achieved_gflops / peak
    if fraction > OVER_THE_CEILING:
        return figures, (f"no fraction: {achieved_gflops:.1f} GFLOP/s achieved exceeds the "
                         f"peak ({how}), which was measured low")
    figures[FRACTION_OF_PEAK] = fraction
    return figures, how


def log_fraction_of_peak(run_id: str, achieved_key: str, precision: str,
                         affinity: Sequence[int] | None) -> None:
    """Log the run's fraction of the ceiling, where its worker logged ``achieved_key`` and
    the cores it used (param ``in_force_cores``; a CPU run with a model whose FLOPs are
    counted)."""
    data = mlflow.MlflowClient().get_run(run_id).data
    metrics: Mapping[str, float] = data.metrics
    if achieved_key not in metrics or CORES_IN_USE not in data.params:
        return
    cores, achieved = int(data.params[CORES_IN_USE]), metrics[achieved_key]
    nominal = metrics.get(NOMINAL_PEAK_GFLOPS)
    figures, how = judge_peak(achieved, precision, cached_ceilings(cores, affinity), nominal)
    if FRACTION_OF_PEAK not in figures and PEAK_GFLOPS in figures:  # measured low: again
        figures, how = judge_peak(achieved, precision,
                                  cached_ceilings(cores, affinity, fresh=True), nominal)
    mlflow.log_metrics(figures)
    mlflow.set_tag(PEAK_TAG, how)
