"""``instances`` x ``cores_per_instance``: copies of one model in pinned worker processes.

The launcher-style layout (PyTorch's ``torch.backends.xeon.run_cpu --ninstances``): N
processes, each pinned to its own disjoint set of ``cores_per_instance`` logical CPUs, with
as many intra-op threads (and OpenMP threads) as it has cores unless the run gives them.
Every instance loads its own copy of the model and reads back its own libraries and
affinity; then, scenario by scenario and batch size by batch size, all start together
(a barrier) and run the same measurement. Their latencies are pooled (the percentiles of
all queries of all instances) and their throughput added up: all their samples over the
longest instance's window, which never exceeds the sum of their own throughputs.

Unlike the ``ensemble`` scenario (several copies, batch-1 single-stream only, measured as
one scenario beside the others), this layout runs every scenario of the run as N copies.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queues
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlflow_dlaas.errors import ConfigError, WorkloadError
from mlflow_dlaas.inference import scenarios
from mlflow_dlaas.inference.latency import LatencyResult
from mlflow_dlaas.worker.lifeline import die_with_parent

if TYPE_CHECKING:
    from mlflow_dlaas.inference.config import InferConfig
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


@dataclass(frozen=True)
class InstanceReport:
    """What one instance read back in its own process."""

    index: int
    cores: tuple[int, ...]
    affinity_in_force: tuple[int, ...]
    threads_in_force: dict[str, Any]
    libraries_in_force: dict[str, str]


class InstanceLayout:
    """N pinned instance processes, tied to this one (they die with it, even on SIGKILL).

    ``start`` loads every copy (and fails the run if any instance could not load or shows a
    library setting not in force); ``measure(scenario)`` runs that scenario in all of them
    at once and returns the pooled measurements with each instance's own.
    """

    def __init__(self, config: InferConfig) -> None:
        self.config = config
        self.cores = layout(config.instances, config.cores_per_instance, config.parallelism)
        context = multiprocessing.get_context("spawn")
        self.results = context.Queue()
        self.commands = [context.Queue() for _ in self.cores]
        # kept here: the children rebuild it by name after start() has dropped its args
        self.barrier = context.Barrier(len(self.cores))
        self.procs = [context.Process(
            target=_instance_main, args=(config, i, cores, os.getpid(), command,
                                         self.results, self.barrier), daemon=True)
            for i, (cores, command) in enumerate(zip(self.cores, self.commands, strict=True))]
        self.reports: list[InstanceReport] = []

    def start(self) -> list[InstanceReport]:
        for p in self.procs:
            p.start()
        found = self._collect("loaded", LOAD_TIMEOUT_S)
        self.reports = sorted(found, key=lambda r: r.index)
        return self.reports

    def measure(self, scenario: str) -> list[tuple[int, LatencyResult, list[LatencyResult]]]:
        """``(batch, pooled, per instance)`` per measurement of ``scenario``."""
        for command in self.commands:
            command.put(scenario)
        per_instance = sorted(self._collect("measured", None), key=lambda item: item[0])
        measured = []
        for parts in zip(*(found for _, found in per_instance), strict=True):
            results = [result for _, result in parts]
            measured.append((parts[0][0], LatencyResult.pooled(results), results))
        return measured

    def stop(self) -> None:
        for command in self.commands:
            command.put(None)
        for p in self.procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()

    def _collect(self, kind: str, timeout_s: float | None) -> list[Any]:
        """One ``kind`` message from every instance; WorkloadError (ConfigError where the
        instance's was one) as soon as one fails or dies."""
        found: list[Any] = []
        waited = 0.0
        while len(found) < len(self.procs):
            try:
                message = self.results.get(timeout=1.0)
            except queues.Empty:
                waited += 1.0
                dead = [p for p in self.procs if p.exitcode not in (None, 0)]
                if dead:
                    raise WorkloadError(f"instance process {self.procs.index(dead[0])} died "
                                        f"(exit code {dead[0].exitcode})") from None
                if timeout_s is not None and waited > timeout_s:
                    raise WorkloadError(f"instances did not report {kind} within "
                                        f"{timeout_s:.0f} s") from None
                continue
            tag, payload = message
            if tag == "error":
                index, error_type, text = payload
                error = ConfigError if error_type == "ConfigError" else WorkloadError
                raise error(f"instance {index}: {text}")
            found.append(payload)
        return found


def _instance_main(config: InferConfig, index: int, cores: tuple[int, ...], parent: int,
                   commands: Any, results: Any, barrier: Any) -> None:
    """One instance: pin, set its thread variables, load its copy, read back, then serve each
    scenario it is told to, starting every measurement with the others."""
    die_with_parent(parent)
    try:
        serve = _load_instance(config, index, cores, results)
    except Exception as e:  # the parent fails the run with it
        barrier.abort()
        results.put(("error", (index, type(e).__name__, str(e))))
        return
    while (scenario := commands.get()) is not None:
        try:
            raw = serve(scenario, barrier)
        except Exception as e:
            barrier.abort()
            results.put(("error", (index, type(e).__name__, str(e))))
            return
        results.put(("measured", (index, raw)))


def _load_instance(config: InferConfig, index: int, cores: tuple[int, ...], results: Any
                   ) -> Callable[[str, Any], list[Measurement]]:
    from mlflow_dlaas.libraries.readback import problems, read_back
    from mlflow_dlaas.parallelism import worker_environment
    from mlflow_dlaas.workloads import infer_worker

    settings = instance_settings(config.parallelism, cores)
    os.sched_setaffinity(0, cores)
    runtime = infer_worker.get_runtime(config.runtime)
    # what the libraries read at load: this instance's thread counts (MXNet's OpenMP pool)
    os.environ.update(worker_environment(settings, runtime.environment(settings)))
    if settings.omp_threads is None:
        os.environ["OMP_NUM_THREADS"] = str(len(cores))
    instance_config = replace(config, parallelism=settings, instances=1, cores_per_instance=0)
    runtime.load()
    source = infer_worker.resolve_source(instance_config, runtime)
    predict = runtime.prepare(source, infer_worker.options_of(instance_config))
    if source.user is not None and source.user.fixed_batch:
        predict = infer_worker.in_fixed_batches(predict, source.user.fixed_batch)
    found = read_back(runtime.native_library, runtime.libraries_in_force())
    issues = problems(config.parallelism, found, runtime.name)
    if issues:
        raise WorkloadError("library settings not in force: " + "; ".join(issues))
    data = infer_worker.inputs_of(runtime, source, config)
    rule = scenarios.StoppingRule(config.min_query_count, config.min_duration_s,
                                  config.warmup_queries)
    results.put(("loaded", InstanceReport(
        index, cores, tuple(sorted(os.sched_getaffinity(0))),
        {k: str(v) for k, v in runtime.threads_in_force().items()}, found.params())))

    def serve(scenario: str, barrier: Any) -> list[Measurement]:
        measured = []
        logs = lambda size: infer_worker.loadgen_dir(scenario, size) / f"instance_{index}"  # noqa: E731
        for size, run in _plan(scenario, predict, data, config, rule, logs):
            barrier.wait()  # every instance starts this measurement together
            measured.append((size, run()))
        return measured

    return serve


def _plan(scenario: str, predict: scenarios.Predictor, data: Any, config: InferConfig,
          rule: scenarios.StoppingRule, logs: Callable[[int], Path]
          ) -> list[tuple[int, Callable[[], LatencyResult]]]:
    """The measurements of ``scenario``: (batch size or samples per query, how to run it);
    ``logs(size)`` is where LoadGen writes each test's logs."""
    if scenario == "single_stream":
        return [(b, lambda b=b: scenarios.single_stream(predict, data[:b], rule, logs(b)))
                for b in config.batch_sizes]
    if scenario == "offline":
        return [(b, lambda b=b: scenarios.offline(predict, data, b, rule, logs(b)))
                for b in config.batch_sizes]
    if scenario == "multi_stream":
        n = config.multi_stream_samples
        return [(n, lambda: scenarios.multi_stream(predict, data, n, rule, logs(n)))]
    raise ConfigError(f"instances run {', '.join(LAYOUT_SCENARIOS)}, not {scenario}")
