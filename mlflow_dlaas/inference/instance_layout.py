"""``instances`` x ``cores_per_instance``: which cores each copy of the model is pinned to.

The launcher-style layout (PyTorch's ``torch.backends.xeon.run_cpu --ninstances``): N
processes, each pinned to its own disjoint set of ``cores_per_instance`` logical CPUs, with
as many intra-op threads (and OpenMP threads) as it has cores unless the run gives them.
Every instance loads its own copy of the model and reads back its own libraries and
affinity; then, scenario by scenario and batch size by batch size, all start together
(a barrier) and run the same measurement. Their latencies are pooled (the percentiles of
all queries of all instances) and their throughput added up: all their samples over the
longest instance's window, which never exceeds the sum of their own throughputs.

The processes themselves: :mod:`mlflow_dlaas.workloads.instance_processes`. Unlike the
``ensemble`` scenario (several copies, batch-1 single-stream only, measured as
one scenario beside the others), this layout runs every scenario of the run as N copies.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.latency import LatencyResult

if TYPE_CHECKING:
    from mlflow_dlaas.parallelism import ParallelismSettings

#: The scenarios an instance layout runs (server and ensemble have their own arrival
#: process and copies; a per-instance Poisson source is not what either measures).
LAYOUT_SCENARIOS = ("single_stream", "multi_stream", "offline")
LOAD_TIMEOUT_S = 600.0
#: (batch size or samples per query, the instance's result with its raw latencies)
Measurement = tuple[int, LatencyResult]


def usable_cores(settings: ParallelismSettings) -> list[int]:
    """The logical CPUs the run may use: ``cpu_affinity``, else this process's affinity."""
    if settings.cpu_affinity:
        return sorted(settings.cpu_affinity)
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def check_layout(instances: int, cores_per_instance: int, scenario_names: Sequence[str],
                 settings: ParallelismSettings) -> None:
    """ConfigError where the layout cannot be laid out on the cores the run may use."""
    if instances < 1 or cores_per_instance < 0:
        raise ConfigError(f"instances must be >= 1 and cores_per_instance >= 0 (0: the usable "
                          f"cores split evenly), got {instances} and {cores_per_instance}")
    if instances == 1:
        if cores_per_instance:
            raise ConfigError("cores_per_instance applies to instances > 1; to run one "
                              "process on fewer cores, give cpu_affinity (e.g. '0-1')")
        return
    layout(instances, cores_per_instance, settings)
    others = [s for s in scenario_names if s not in LAYOUT_SCENARIOS]
    if others:
        raise ConfigError(f"instances={instances} runs {', '.join(LAYOUT_SCENARIOS)} as "
                          f"copies; {', '.join(others)} cannot be (they bring their own "
                          "copies or arrival process): run them with instances=1")


def layout(instances: int, cores_per_instance: int, settings: ParallelismSettings
           ) -> list[tuple[int, ...]]:
    """Each instance's cores: consecutive, disjoint blocks of the usable cores."""
    cores = usable_cores(settings)
    per = cores_per_instance or len(cores) // instances
    if per < 1 or instances * per > len(cores):
        where = (f"cpu_affinity {','.join(map(str, cores))}" if settings.cpu_affinity
                 else f"the {len(cores)} cores this process may use ({_ranges(cores)})")
        raise ConfigError(f"instances={instances} x cores_per_instance={per or 1} needs "
                          f"{instances * max(per, 1)} cores, but the run has {where}; lower "
                          "instances or cores_per_instance")
    return [tuple(cores[i * per:(i + 1) * per]) for i in range(instances)]


def _ranges(cores: list[int]) -> str:
    return ",".join(map(str, cores)) if len(cores) <= 8 else f"{cores[0]}-{cores[-1]}"


def instance_settings(settings: ParallelismSettings, cores: tuple[int, ...]
                      ) -> ParallelismSettings:
    """One instance's settings: its cores, and as many intra-op threads as cores unless the
    run gives a count."""
    return replace(settings, cpu_affinity=cores,
                   intra_op_threads=settings.intra_op_threads or len(cores))
