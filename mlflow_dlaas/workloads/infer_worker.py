"""The measured inference worker: load, check, then every scenario over a batch-size sweep.

Started by :mod:`mlflow_dlaas.workloads.infer` (the entry point, which owns the MLflow run)
as ``python -m mlflow_dlaas.workloads.infer_worker --runtime onnxruntime --batch_sizes 1,8``
with the parallel settings already in its environment and affinity; imports no MLflow.
Metrics carry the same keys for every runtime; per batch size they are reported with
step = batch size and under ``{scenario}/batch_{size}/...``. Each scenario's latency CDF is
the artifact ``latency/cdf.csv``. MLPerf's LoadGen runs every test
(:mod:`~mlflow_dlaas.inference.scenarios`): its summary and detail logs are the artifacts
``loadgen/{scenario}_batch_{size}/``, tag ``dlaas.loadgen_result`` is ``VALID`` when it
judged every test VALID, and tag ``dlaas.scenario_rules`` names each rule a test missed.
"""

from __future__ import annotations

import csv
import json
import logging
import multiprocessing
import os
import threading
import time
from collections import defaultdict
from dataclasses import asdict
from typing import Any

import numpy as np

from mlflow_dlaas.backends import InferenceRuntime, get_runtime
from mlflow_dlaas.backends.builds import framework_builds
from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.environment import FINGERPRINT_DIR, as_tags, fingerprint, write_fingerprint
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.figures import significant
from mlflow_dlaas.hardware import cores_in_use, fp32_peak_gflops
from mlflow_dlaas.inference import equivalence, scenarios
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.latency import CDF_POINTS, LatencyResult
from mlflow_dlaas.inference.sources.load import load_source
from mlflow_dlaas.measured_process.channel import WorkerChannel, worker_dir
from mlflow_dlaas.measured_process.lifeline import die_with_parent, exit_without_teardown
from mlflow_dlaas.measured_process.main import serve
from mlflow_dlaas.parallelism import process_settings_in_force
from mlflow_dlaas.runs.schema import (
    ACTIVATION_BYTES,
    CORES_IN_USE,
    ENSEMBLE_SIZE,
    EQUIVALENCE_RULE_TAG,
    FORWARD_FLOPS,
    LATENCY_P50,
    LATENCY_P99,
    LOAD_TIME,
    LOADGEN_RESULT_TAG,
    MEASURED_TIME,
    MULTI_STREAM_SAMPLES,
    NOMINAL_PEAK_GFLOPS,
    OFFLINE_GFLOPS,
    PARAMETER_COUNT,
    PEAK_TAG,
    QUERY_COUNT,
    RUNTIME_VERSION_TAG,
    SAMPLES_TOTAL,
    SCENARIO_RULES_TAG,
    THROUGHPUT,
    WEIGHT_BYTES,
    scenario_key,
)
from mlflow_dlaas.workloads.instance_processes import InstanceLayout
from mlflow_dlaas.workloads.library_report import report_libraries
from mlflow_dlaas.workloads.server_scenario import serve_server
from mlflow_dlaas.workloads.serving import (
    in_fixed_batches,
    inputs_of,
    loadgen_dir,
    loadgen_root,
    prepared,
    sample_inputs,
)

log = logging.getLogger(__name__)
CDF_ARTIFACT_DIR, CDF_FILE = "latency", "cdf.csv"
LOADGEN_ARTIFACT_DIR = "loadgen"
INSTANCES_ARTIFACT_DIR, INSTANCES_FILE = "instances", "instances.json"
#: what a scenario runner measured: (scenario, batch size, result) per measurement
Measured = list[tuple[str, int, LatencyResult]]


def infer(config: InferConfig, channel: WorkerChannel) -> None:
    """Load and check the model, then run every scenario, each in its own phase."""
    runtime = get_runtime(config.runtime)
    rule = scenarios.StoppingRule(config.min_query_count, config.min_duration_s,
                                  config.warmup_queries)
    loadgen_root()  # before any instance process starts
    with channel.phase("load"):
        t0 = time.perf_counter()
        runtime.load()
        source = load_source(config, runtime)
        predict = prepared(runtime, source, config)
        load_s = time.perf_counter() - t0
    log.info(f"load: {runtime.name} {runtime.version()} ready to serve in {load_s:.1f} s")
    host = _describe(channel, runtime, source, load_s)
    report_libraries(channel, config.parallelism, runtime.name, runtime.native_library,
                     runtime.libraries_in_force())
    _check_batching(source, config)
    channel.wait_until_watched()
    if source.user is not None and source.user.fixed_batch:
        predict = in_fixed_batches(predict, source.user.fixed_batch)
    with channel.phase("check"):
        _check(channel, predict, runtime, source, config)
    if config.instances > 1:
        del predict  # each instance serves its own copy
        measured = _serve_instances(channel, config)
    else:
        data = inputs_of(runtime, source, config)
        measured = []
        for scenario in config.scenarios:
            with channel.phase(scenario):
                measured += SCENARIO_RUNNERS[scenario](channel, predict, data, config, rule)
    _report_totals_and_cdf(channel, measured)
    _report_loadgen(channel, measured)
    _report_compute(channel, measured, source, config, host)


def _report_compute(channel: WorkerChannel, measured: Measured, source: ModelSource,
                    config: InferConfig, host: dict[str, Any]) -> None:
    """The model's FLOPs per sample (its spec's count, or a text model's), the GFLOP/s of the
    best offline batch size (a batch size's rate is its throughput times the FLOPs per
    sample), the cores it could use and their nominal FP32 peak; the entry holds the rate
    against the measured ceiling afterwards (:mod:`~mlflow_dlaas.workloads.peak`)."""
    flops = source.flops_per_sample()
    if flops is None:
        channel.tags({PEAK_TAG: "no FLOPs: the user's own model has no spec to count them"})
        return
    figures = {FORWARD_FLOPS: float(flops)}
    if source.spec is not None:  # what the roofline needs: the bytes a sample moves
        shape, classes = source.input_shape, source.num_classes
        figures[ACTIVATION_BYTES] = 8.0 * source.spec.activation_elements(shape, classes)
        figures[WEIGHT_BYTES] = 4.0 * source.spec.parameter_count(shape, classes)
    rates = [flops * r.throughput_samples_per_s / 1e9 for s, _, r in measured if s == "offline"]
    if not rates:
        channel.tags({PEAK_TAG: "no offline scenario: nothing to hold against the peak"})
    elif config.device != "cpu":
        channel.tags({PEAK_TAG: f"no peak: only CPU peaks are measured, this run used "
                                f"{config.device}"})
    if rates:
        figures[OFFLINE_GFLOPS] = max(rates)
    if rates and config.device == "cpu":
        threads = None if config.instances > 1 else config.parallelism.intra_op_threads
        cores = cores_in_use(host, threads)
        nominal, _ = fp32_peak_gflops(host, cores)
        channel.params({CORES_IN_USE: cores})
        if nominal:
            figures[NOMINAL_PEAK_GFLOPS] = nominal
    channel.metrics(figures)


def _report_loadgen(channel: WorkerChannel, measured: Measured) -> None:
    """LoadGen's verdicts as tags, and its logs as artifacts."""
    judged = [(_test_label(name, size), result) for name, size, result in measured
              if result.loadgen is not None]
    shortfalls = [s for label, result in judged for s in scenarios.rule_shortfalls(label, result)]
    invalid = sum(1 for _, result in judged if not result.loadgen.valid)
    channel.tags({SCENARIO_RULES_TAG: "not met: " + "; ".join(shortfalls)
                  if shortfalls else "met"})
    if judged:
        channel.tags({LOADGEN_RESULT_TAG: "VALID" if not invalid else
                      f"INVALID ({invalid} of {len(judged)} tests)"})
    logs = loadgen_root()
    if any(logs.iterdir()):
        channel.artifacts(logs, LOADGEN_ARTIFACT_DIR)


def _test_label(scenario: str, size: int) -> str:
    """How a test is named in the run's verdict tags: multi-stream by its samples a query."""
    if scenario == "multi_stream":
        return f"multi_stream ({size} samples a query)"
    return f"{scenario} batch {size}"


def _serve_instances(channel: WorkerChannel, config: InferConfig) -> Measured:
    """``instances`` pinned copies (:mod:`~mlflow_dlaas.workloads.instance_processes`): each
    scenario's figures pooled over them, under the same keys as one process's; each
    instance's cores, threads and libraries as read back in it, and its own figures, in
    the artifact ``instances/instances.json``."""
    layout = InstanceLayout(config)
    try:
        with channel.phase("instances_load"):
            reports = layout.start()
        channel.params({"in_force_instance_cores": " | ".join(
            ",".join(map(str, r.affinity_in_force)) for r in reports)})
        measured: Measured = []
        own: list[dict[str, Any]] = []
        for scenario in config.scenarios:
            with channel.phase(scenario):
                for size, pooled, parts in layout.measure(scenario):
                    if scenario == "multi_stream":
                        _report_multi_stream(channel, size, pooled)
                    else:
                        _report_batch(channel, scenario, size, pooled)
                    measured.append((scenario, size, pooled))
                    own += [{"scenario": scenario, "batch_size": size, "instance": i,
                             THROUGHPUT: r.throughput_samples_per_s,
                             LATENCY_P50: r.p50_ms, LATENCY_P99: r.p99_ms,
                             QUERY_COUNT: r.count, MEASURED_TIME: r.duration_s}
                            for i, r in enumerate(parts)]
    finally:
        layout.stop()
    out = worker_dir()
    (out / INSTANCES_FILE).write_text(json.dumps(
        {"instances": [asdict(r) for r in reports], "measurements": own}, indent=2))
    channel.artifacts(out, INSTANCES_ARTIFACT_DIR)
    return measured


def _check_batching(source: ModelSource, config: InferConfig) -> None:
    """A model that fixes its batch size runs at that batch size only."""
    fixed = source.user.fixed_batch if source.user is not None else None
    if fixed is None:
        return
    if set(config.batch_sizes) != {fixed}:
        raise ConfigError(f"{source.name} fixes its batch size at {fixed}; give -P "
                          f"batch_sizes={fixed}")
    if "server" in config.scenarios and (fixed != 1 or config.server_max_batch != 1):
        raise ConfigError(f"{source.name} fixes its batch size at {fixed}: the server "
                          "scenario needs batch 1 queries and server_max_batch=1")
    if "ensemble" in config.scenarios and fixed != 1:
        raise ConfigError(f"{source.name} fixes its batch size at {fixed}: ensemble members "
                          "serve batch 1 queries")
    if "multi_stream" in config.scenarios and config.multi_stream_samples % fixed:
        raise ConfigError(f"{source.name} fixes its batch size at {fixed}: "
                          f"multi_stream_samples must be a multiple of {fixed}")


def _report_batch(channel: WorkerChannel, scenario: str, batch: int,
                  result: LatencyResult) -> None:
    """One batch size's figures: as history (step = batch size) and under flat keys; a line
    on the console, so that a long sweep says where it is."""
    channel.metrics(result.metrics(scenario), step=batch)
    channel.metrics(result.metrics(f"{scenario}/batch_{batch}"))
    log.info(f"{scenario} batch {batch}: p99 {significant(result.p99_ms)} ms, "
             f"{significant(result.throughput_samples_per_s)} samples/s "
             f"({result.count:,} queries, {result.duration_s:.1f} s)")


def _report_totals_and_cdf(channel: WorkerChannel, measured: Measured) -> None:
    """``{scenario}/samples_total`` (for energy per prediction) and the latency CDFs."""
    totals: dict[str, float] = defaultdict(float)
    for scenario, _, result in measured:  # ensemble members count towards "ensemble"
        totals[scenario_key(scenario.split("/")[0], SAMPLES_TOTAL)] += result.samples
    if totals:
        channel.metrics(dict(totals))
    out = worker_dir()
    with (out / CDF_FILE).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["scenario", "batch_size", "percentile", "latency_ms", QUERY_COUNT])
        for scenario, batch, result in measured:  # with the queries each curve rests on
            writer.writerows([scenario, batch, int(q), round(v, 6), result.count]
                             for q, v in zip(CDF_POINTS, result.cdf_ms, strict=True))
    channel.artifacts(out, CDF_ARTIFACT_DIR)


def _describe(channel: WorkerChannel, runtime: InferenceRuntime, source: ModelSource,
              load_s: float) -> dict[str, Any]:
    """Settings in force, input shape, fingerprint (returned) and load time."""
    in_force = {**runtime.threads_in_force(), **process_settings_in_force()}
    channel.params({**{f"in_force_{k}": v for k, v in in_force.items()},
                    "input_shape": "x".join(map(str, source.input_shape)),
                    "reference_framework": source.reference_framework,
                    **({"architecture": source.name} if source.flops_per_sample() else {}),
                    **({"model_inputs": source.user.describe_inputs()}
                       if source.user is not None else {})})
    host = {**fingerprint(), **framework_builds()}
    channel.tags({RUNTIME_VERSION_TAG: runtime.version(), **as_tags(host)})
    channel.artifacts(write_fingerprint(worker_dir() / FINGERPRINT_DIR, host), FINGERPRINT_DIR)
    channel.metrics({LOAD_TIME: load_s, **({PARAMETER_COUNT: source.parameter_count}
                                          if source.parameter_count else {})})
    return host


def _check(channel: WorkerChannel, predict: Predictor, runtime: InferenceRuntime,
           source: ModelSource, config: InferConfig) -> None:
    reference = source.reference_outputs if source.reference_outputs.size else runtime.reference()
    if source.user is not None:  # the model's own layout
        outputs = predict(source.reference_inputs)
    else:
        outputs = predict(runtime.layout(source.reference_inputs))
    result = equivalence.compare(outputs, reference, precision=config.precision,
                                 rtol=config.rtol, atol=config.atol)
    channel.metrics(result.metrics())
    channel.tags({EQUIVALENCE_RULE_TAG: result.rule})
    equivalence.require(result, runtime.name, source.reference_framework)


def _single_stream(channel: WorkerChannel, predict: Predictor, data: np.ndarray,
                   config: InferConfig, rule: scenarios.StoppingRule) -> Measured:
    measured: Measured = []
    for batch in config.batch_sizes:
        result = scenarios.single_stream(predict, data[:batch], rule,
                                         loadgen_dir("single_stream", batch))
        _report_batch(channel, "single_stream", batch, result)
        measured.append(("single_stream", batch, result))
    return measured


def _offline(channel: WorkerChannel, predict: Predictor, data: np.ndarray,
             config: InferConfig, rule: scenarios.StoppingRule) -> Measured:
    measured: Measured = []
    for batch in config.batch_sizes:
        result = scenarios.offline(predict, data, batch, rule, loadgen_dir("offline", batch))
        _report_batch(channel, "offline", batch, result)
        measured.append(("offline", batch, result))
    return measured


def _multi_stream(channel: WorkerChannel, predict: Predictor, data: Any,
                  config: InferConfig, rule: scenarios.StoppingRule) -> Measured:
    """Queries of ``multi_stream_samples`` samples back to back, a property of the scenario
    (``multi_stream/samples_per_query``), never a batch size: its figures go under
    ``multi_stream/...`` only. A model that fixes its batch size takes each query in batches
    of that size."""
    n = config.multi_stream_samples
    result = scenarios.multi_stream(predict, data, n, rule,
                                    loadgen_root() / f"multi_stream_{n}_samples_per_query")
    _report_multi_stream(channel, n, result)
    return [("multi_stream", n, result)]


def _report_multi_stream(channel: WorkerChannel, samples: int, result: LatencyResult) -> None:
    channel.metrics({**result.metrics("multi_stream"), MULTI_STREAM_SAMPLES: float(samples)})


def _ensemble(channel: WorkerChannel, predict: Predictor, data: np.ndarray,
              config: InferConfig, rule: scenarios.StoppingRule) -> Measured:
    """K copies served at once, as threads of this process or as K processes.

    Every copy is loaded first; then all start together, each in single-stream, so the
    measured windows overlap. Aggregate throughput = all samples / the longest window.
    """
    x = data[:1]
    k = config.ensemble_size
    if config.ensemble_mode == "threads":
        results = _serve_threads(predict, config, x, rule)
    else:
        results = _serve_processes(config, k)
    window = max(r.duration_s for r in results)
    metrics = {ENSEMBLE_SIZE: float(k),
               scenario_key("ensemble", THROUGHPUT):
                   sum(r.count * r.samples_per_query for r in results) / window}
    for i, r in enumerate(results):
        metrics[scenario_key("ensemble", f"model{i}_{LATENCY_P99}")] = r.p99_ms
        metrics[scenario_key("ensemble", f"model{i}_{LATENCY_P50}")] = r.p50_ms
    channel.metrics(metrics)
    return [(f"ensemble/model{i}", 1, r) for i, r in enumerate(results)]


def _serve_threads(predict: Predictor, config: InferConfig, x: np.ndarray,
                   rule: scenarios.StoppingRule) -> list[LatencyResult]:
    runtime = get_runtime(config.runtime)
    runtime.load()
    source = load_source(config, runtime)
    members = [predict] + [prepared(runtime, source, config)
                           for _ in range(config.ensemble_size - 1)]
    results: list[LatencyResult] = []
    lock = threading.Lock()

    def serve(member: Predictor) -> None:
        result = scenarios.timed_single_stream(member, x, rule)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=serve, args=(m,)) for m in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _serve_processes(config: InferConfig, k: int) -> list[LatencyResult]:
    """K member processes, tied to this one: they die with it, even on SIGKILL."""
    context = multiprocessing.get_context("spawn")
    queue, go = context.Queue(), context.Event()
    procs = [context.Process(target=_ensemble_member, args=(config, os.getpid(), queue, go),
                             daemon=True) for _ in range(k)]
    for p in procs:
        p.start()
    for _ in procs:  # every member has loaded its copy
        queue.get(timeout=600)
    go.set()
    results = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    return results


def _ensemble_member(config: InferConfig, parent: int, queue: Any, go: Any) -> None:
    """One member process: load its own copy, say so, wait for the start, serve, report."""
    die_with_parent(parent)
    runtime = get_runtime(config.runtime)
    runtime.load()
    source = load_source(config, runtime)
    predict = prepared(runtime, source, config)
    x = sample_inputs(runtime, source, config.seed + 1, 1)
    rule = scenarios.StoppingRule(config.min_query_count, config.min_duration_s,
                                  config.warmup_queries)
    queue.put("loaded")
    go.wait()
    queue.put(scenarios.timed_single_stream(predict, x, rule))


SCENARIO_RUNNERS = {"single_stream": _single_stream, "multi_stream": _multi_stream,
                    "offline": _offline, "server": serve_server, "ensemble": _ensemble}


def main() -> int:
    """Benchmark per the entry's configuration; report figures, or the error, to the
    entry."""
    return serve("infer", lambda params, channel: infer(
        InferConfig.from_params(params), channel))


if __name__ == "__main__":
    exit_without_teardown(main())
