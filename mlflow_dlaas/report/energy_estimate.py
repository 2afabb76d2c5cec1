"""Energy where no counter could be read (most cloud VMs have no readable RAPL): an estimate
from the CPU time a run used and a published range of watts per vCPU, always an interval and
always labelled estimated. The range: Cloud Carbon Footprint's compute coefficients (its
methodology, "Compute": average minimum and maximum watts per vCPU over each cloud's CPU
microarchitectures: AWS 0.74-3.5 W, GCP 0.71-4.26 W, Azure 0.78-3.76 W), the lowest
minimum to the highest maximum. Never the basis of a verdict between configurations on one
host: there it only restates CPU time (the questions ask measured energy only)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlflow_dlaas.runs import schema

#: watts per vCPU at the least and at the most (Cloud Carbon Footprint, compute coefficients)
WATTS_PER_VCPU = (0.71, 4.26)
SOURCE = ("estimated: CPU time x 0.71-4.26 W per vCPU (Cloud Carbon Footprint's compute "
          "coefficients for AWS, GCP and Azure)")
ESTIMATED_LOW = "whole_run_energy_estimated_low_joules"
ESTIMATED_HIGH = "whole_run_energy_estimated_high_joules"
PER_1000_LOW = "energy_per_1000_predictions_estimated_low_joules"
PER_1000_HIGH = "energy_per_1000_predictions_estimated_high_joules"
#: the run table's column that names each run's energy source
SOURCE_COLUMN = "energy_source"
RAPL, NVML, ESTIMATED = "rapl", "nvml", "estimated"


def energy_sources(runs: pd.DataFrame, run_columns: list[str]) -> pd.Series:
    """Per run: ``rapl``, ``nvml``, ``rapl+nvml`` where its whole-run energy was measured,
    ``estimated`` where only its CPU time was, '' where neither."""
    def measured(kind: str) -> pd.Series:
        columns = [c for c in run_columns if f"/{kind}" in c]
        return runs[columns].notna().any(axis=1) if columns else \
            pd.Series(False, index=runs.index)

    rapl, nvml = measured("cpu_package"), measured("gpu")
    cpu = _numbers(runs, schema.RUN_CPU_TIME).notna()
    names = np.select([rapl & nvml, rapl, nvml, cpu],
                      [f"{RAPL}+{NVML}", RAPL, NVML, ESTIMATED], default="")
    return pd.Series(names, index=runs.index)


def add_estimates(runs: pd.DataFrame, estimated: pd.Series) -> pd.DataFrame:
    """The estimate's ends, whole run and per 1,000 predictions, for the runs ``estimated``
    marks (NaN for the others)."""
    cpu = _numbers(runs, schema.RUN_CPU_TIME).where(estimated)
    served = pd.Series(0.0, index=runs.index)
    busy = pd.Series(np.nan, index=runs.index)
    for scenario in ("single_stream", "offline"):
        samples = _numbers(runs, schema.scenario_key(scenario, schema.SAMPLES_TOTAL))
        seconds = _numbers(runs, f"{scenario}/{schema.PHASE_CPU_TIME}")
        both = samples.notna() & seconds.notna()
        served = served.add(samples.where(both, 0.0))
        busy = busy.add(seconds.where(both), fill_value=0)
    per_sample = (busy / served.replace(0, np.nan)).where(estimated)
    low, high = WATTS_PER_VCPU
    return runs.assign(**{f"metrics.{ESTIMATED_LOW}": cpu * low,
                          f"metrics.{ESTIMATED_HIGH}": cpu * high,
                          f"metrics.{PER_1000_LOW}": per_sample * 1000 * low,
                          f"metrics.{PER_1000_HIGH}": per_sample * 1000 * high})


def _numbers(runs: pd.DataFrame, metric: str) -> pd.Series:
    key = f"metrics.{metric}"
    return (pd.to_numeric(runs[key], errors="coerce") if key in runs
            else pd.Series(np.nan, index=runs.index))
