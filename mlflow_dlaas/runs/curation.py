"""Which figures become MLflow metrics (the few a person compares) and which stay in the
run's ``summary.json`` artifact (every other statistic).

A run carries its headline figures as top-level metrics (no ``/``; MLflow 3.17's run page
lists them in its Overview table, but charts them last, in "Model metrics", after the
``{phase}/`` sections, which it sorts by code point), per-epoch or per-batch-size histories
as single keys with steps, and per phase only what answers a question: duration, peak RSS,
CPU seconds, mean CPU % and energy. Peak memory, counted in bytes by the monitor (as
``summary.json`` keeps it), is logged in megabytes (``{phase}/peak_proc_rss_megabytes``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from mlflow_dlaas.runs.schema import (
    CPU_PACKAGE_ENERGY,
    CPU_TIME,
    ENERGY,
    GPU_ENERGY,
    LATENCY_MEAN,
    LATENCY_P50,
    LATENCY_P90,
    LATENCY_P95,
    LATENCY_P99_EARLY_STOPPING,
    LATENCY_STDEV,
    MEASURED_TIME,
    OTHER_CORES,
    PEAK_MEMORY,
    PHASE_CPU_TIME,
    PHASE_DURATION,
    PHASE_MEAN_CPU,
    PHASE_PEAK_RSS,
    QUERY_COUNT,
    RUN_PHASE,
    current_name,
    megabytes,
)

#: Per-phase monitor statistics logged as metrics; ``{phase}/...`` energy keys also are.
PHASE_STATISTICS = (PHASE_DURATION, PHASE_PEAK_RSS, PHASE_CPU_TIME, PHASE_MEAN_CPU)
_ENERGY = re.compile("|".join(re.escape(key).replace(r"\{i\}", r"\d+")
                             for key in (CPU_PACKAGE_ENERGY, GPU_ENERGY)))
#: Latency statistics kept out of the metrics (p50, p99, throughput and query counts stay).
DETAIL_STATISTICS = frozenset({LATENCY_MEAN, LATENCY_P90, LATENCY_P95, LATENCY_STDEV,
                               MEASURED_TIME})
#: The validity figure logged, as its worst over the judged phases; the others (and each
#: phase's own) are in summary.json, and the tag dlaas.validity_reason names the phase.
VALIDITY_FIGURE = OTHER_CORES


#: Kept out of histories over batch sizes (each batch size's own key carries them; the
#: histories chart p99 and throughput against batch size).
PER_BATCH_ONLY = frozenset({QUERY_COUNT, LATENCY_P99_EARLY_STOPPING, LATENCY_P50})
#: One ensemble member's latencies (the ensemble's throughput and size are metrics).
_MEMBER = re.compile(r"model\d+_latency_\w+_ms")
#: Phases around the measured work: how long they took and how much memory they held.
SETUP_PHASES = frozenset({"load", "warmup", "check", "save"})
SETUP_STATISTICS = (PHASE_DURATION, PHASE_PEAK_RSS)
#: The whole run: what the report falls back on for runs without ``measured_*`` figures,
#: and its energy (every energy key of the run phase is kept).
RUN_STATISTICS = (PHASE_PEAK_RSS, PHASE_CPU_TIME)


def curated_phase_summary(summary: Mapping[str, float]) -> dict[str, float]:
    """The monitor summary's keys worth a metric (:data:`PHASE_STATISTICS` and energy), under
    their metric names and units."""
    kept = {}
    for key, value in summary.items():
        phase, _, statistic = key.partition("/")
        if phase in SETUP_PHASES:
            wanted = statistic in SETUP_STATISTICS
        elif phase == RUN_PHASE:
            wanted = statistic in RUN_STATISTICS or _ENERGY.fullmatch(statistic) is not None
        else:
            wanted = statistic in PHASE_STATISTICS or _ENERGY.fullmatch(statistic) is not None
        if wanted:
            name, factor = current_name(key)
            kept[name] = value * factor
    return kept


def is_detail(key: str, stepped: bool = False) -> bool:
    """Whether a workload metric belongs in summary.json rather than the metric list;
    ``stepped``: it is a history (one value per batch size or offered load)."""
    statistic = key.rsplit("/", 1)[-1]
    return (statistic in DETAIL_STATISTICS or _MEMBER.fullmatch(statistic) is not None
            or (stepped and statistic in PER_BATCH_ONLY))


def split_details(values: Mapping[str, float], stepped: bool = False
                  ) -> tuple[dict[str, float], dict[str, float]]:
    """``values`` as (logged as metrics, kept as details)."""
    detail = {k for k in values if is_detail(k, stepped)}
    return ({k: v for k, v in values.items() if k not in detail},
            {k: v for k, v in values.items() if k in detail})


def curated_validity(figures: Mapping[str, float]) -> dict[str, float]:
    """``validity/max_other_processes_cpu_cores``: the worst judged phase's figure."""
    found = [v for k, v in figures.items() if k.endswith(f"/{VALIDITY_FIGURE}")]
    return {f"validity/max_{VALIDITY_FIGURE}": max(found)} if found else {}


def phase_total(summary: Mapping[str, float], phases: Iterable[str], statistic: str
                ) -> float | None:
    """The sum of ``{phase}/{statistic}`` over ``phases`` (None when no phase has it)."""
    found = [summary[f"{p}/{statistic}"] for p in phases if f"{p}/{statistic}" in summary]
    return sum(found) if found else None


def phase_energy(summary: Mapping[str, float], phases: Iterable[str]) -> float | None:
    """Joules of every CPU package and GPU over ``phases`` (None when nothing measured it)."""
    wanted = set(phases)
    found = [v for k, v in summary.items()
             if k.partition("/")[0] in wanted and _ENERGY.fullmatch(k.partition("/")[2])]
    return sum(found) if found else None


def headline_figures(summary: Mapping[str, float], phases: Iterable[str]) -> dict[str, float]:
    """The ``Headline/`` figures of ``phases``: their peak memory (MB), CPU seconds and
    energy (where a counter was read)."""
    phases = list(phases)
    peaks = [summary[f"{p}/{PHASE_PEAK_RSS}"] for p in phases
             if f"{p}/{PHASE_PEAK_RSS}" in summary]
    figures = {PEAK_MEMORY: megabytes(max(peaks))} if peaks else {}
    cpu = phase_total(summary, phases, PHASE_CPU_TIME)
    if cpu is not None:
        figures[CPU_TIME] = cpu
    energy = phase_energy(summary, phases)
    if energy is not None:
        figures[ENERGY] = energy
    return figures
