"""The instance processes of an ``instances`` > 1 run: N pinned copies of the model, each
loading its own copy and reading back its own libraries and affinity, all starting each
measurement together (a barrier); their latencies are pooled and their throughput added up
(the layout: :mod:`mlflow_dlaas.inference.instance_layout`)."""

from __future__ import annotations

import multiprocessing
import os
import queue as queues
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mlflow_dlaas.backends import get_runtime
from mlflow_dlaas.errors import ConfigError, WorkloadError
from mlflow_dlaas.inference import scenarios
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.instance_layout import LAYOUT_SCENARIOS, instance_settings, layout
from mlflow_dlaas.inference.latency import LatencyResult
from mlflow_dlaas.inference.sources.load import load_source
from mlflow_dlaas.libraries.readback import problems, read_back
from mlflow_dlaas.measured_process.lifeline import die_with_parent
from mlflow_dlaas.parallelism import worker_environment
from mlflow_dlaas.workloads.serving import (
    in_fixed_batches,
    inputs_of,
    loadgen_dir,
    prepared,
)

LOAD_TIMEOUT_S = 600.0
#: (batch size or samples per query, the instance's result with its raw latencies)
Measurement = tuple[int, LatencyResult]


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
    settings = instance_settings(config.parallelism, cores)
    os.sched_setaffinity(0, cores)
    runtime = get_runtime(config.runtime)
    # what the libraries read at load: this instance's thread counts (MXNet's OpenMP pool)
    os.environ.update(worker_environment(settings, runtime.environment(settings)))
    if settings.omp_threads is None:
        os.environ["OMP_NUM_THREADS"] = str(len(cores))
    instance_config = replace(config, parallelism=settings, instances=1, cores_per_instance=0)
    runtime.load()
    source = load_source(instance_config, runtime)
    predict = prepared(runtime, source, instance_config)
    if source.user is not None and source.user.fixed_batch:
        predict = in_fixed_batches(predict, source.user.fixed_batch)
    found = read_back(runtime.native_library, runtime.libraries_in_force())
    issues = problems(config.parallelism, found, runtime.name)
    if issues:
        raise WorkloadError("library settings not in force: " + "; ".join(issues))
    data = inputs_of(runtime, source, config)
    rule = scenarios.StoppingRule(config.min_query_count, config.min_duration_s,
                                  config.warmup_queries)
    results.put(("loaded", InstanceReport(
        index, cores, tuple(sorted(os.sched_getaffinity(0))),
        {k: str(v) for k, v in runtime.threads_in_force().items()}, found.params())))

    def serve(scenario: str, barrier: Any) -> list[Measurement]:
        measured = []
        logs = lambda size: loadgen_dir(scenario, size) / f"instance_{index}"  # noqa: E731
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
