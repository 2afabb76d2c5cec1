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
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from mlflow_dlaas.backends import InferenceRuntime, get_runtime
from mlflow_dlaas.backends.builds import framework_builds
from mlflow_dlaas.backends.served_model import Predictor
from mlflow_dlaas.environment import FINGERPRINT_DIR, as_tags, fingerprint, write_fingerprint
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.hardware import cores_in_use, fp32_peak_gflops, fraction_of_peak
from mlflow_dlaas.inference import equivalence, scenarios
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.latency import CDF_POINTS, LatencyResult
from mlflow_dlaas.inference.source import (
    ModelSource,
)
from mlflow_dlaas.measured_process.channel import WorkerChannel, worker_dir
from mlflow_dlaas.measured_process.lifeline import die_with_parent, exit_without_teardown
from mlflow_dlaas.measured_process.main import serve
from mlflow_dlaas.parallelism import process_settings_in_force
from mlflow_dlaas.runs.schema import (
    ENSEMBLE_SIZE,
    EQUIVALENCE_RULE_TAG,
    FORWARD_FLOPS,
    FRACTION_OF_PEAK,
    LATENCY_P50,
    LATENCY_P99,
    LOAD_TIME,
    LOADGEN_RESULT_TAG,
    MEASURED_TIME,
    OFFLINE_GFLOPS,
    PARAMETER_COUNT,
    PEAK_GFLOPS,
    PEAK_TAG,
    QUERY_COUNT,
    RUNTIME_VERSION_TAG,
    SAMPLES_TOTAL,
    SCENARIO_RULES_TAG,
    SERVER_ACHIEVED_QPS,
    SERVER_LOAD_ACHIEVED_QPS,
    SERVER_LOAD_P99,
    SERVER_LOAD_QUERY_COUNT,
    SERVER_MAX_QPS,
    SERVER_MEAN_BATCH,
    SERVER_P99_AT_MAX_QPS,
    SERVER_RATE_SEARCH_TAG,
    SERVER_TARGET_QPS,
    THROUGHPUT,
    scenario_key,
)
from mlflow_dlaas.workloads.instance_processes import InstanceLayout
from mlflow_dlaas.workloads.library_report import report_libraries
from mlflow_dlaas.workloads.serving import (
    in_fixed_batches,
    inputs_of,
    loadgen_dir,
    loadgen_root,
    prepared,
    resolve_source,
    sample_inputs,
)

log = logging.getLogger(__name__)
CDF_ARTIFACT_DIR, CDF_FILE = "latency", "cdf.csv"
LOADGEN_ARTIFACT_DIR = "loadgen"
#: A server rate chosen automatically is halved, at most this many times, while the runtime
#: falls behind it (serves less than KEPT_UP of the offered rate, its queue growing).
AUTO_RATE_BACKOFFS = 3
KEPT_UP = 0.85
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
        source = resolve_source(config, runtime)
        predict = prepared(runtime, source, config)
        load_s = time.perf_counter() - t0
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
    best offline batch size, and that rate against the CPU's FP32 peak of the cores in use (a
    batch size's own rate is its throughput times the FLOPs per sample)."""
    flops = source.flops_per_sample()
    if flops is None:
        channel.tags({PEAK_TAG: "no FLOPs: the user's own model has no spec to count them"})
        return
    figures = {FORWARD_FLOPS: float(flops)}
    rates = [flops * r.throughput_samples_per_s / 1e9 for s, _, r in measured if s == "offline"]
    how = "no offline scenario: nothing to hold against the peak"
    if rates:
        figures[OFFLINE_GFLOPS] = max(rates)
        threads = None if config.instances > 1 else config.parallelism.intra_op_threads
        peak, how = (fp32_peak_gflops(host, cores_in_use(host, threads))
                     if config.device == "cpu" else
                     (None, f"no peak: only CPU peaks are derived, this run used "
                            f"{config.device}"))
        if peak:
            figures[PEAK_GFLOPS] = peak
            fraction, over = fraction_of_peak(max(rates), peak)
            if fraction is None:
                how = over
            else:
                figures[FRACTION_OF_PEAK] = fraction
    channel.metrics(figures)
    channel.tags({PEAK_TAG: how})


def _report_loadgen(channel: WorkerChannel, measured: Measured) -> None:
    """LoadGen's verdicts as tags, and its logs as artifacts."""
    judged = [(f"{name} batch {batch}", result) for name, batch, result in measured
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
    """One batch size's figures: as history (step = batch size) and under flat keys."""
    channel.metrics(result.metrics(scenario), step=batch)
    channel.metrics(result.metrics(f"{scenario}/batch_{batch}"))


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
    """Queries of ``multi_stream_samples`` samples back to back (step = samples per query);
    a model that fixes its batch size takes each query in batches of that size."""
    n = config.multi_stream_samples
    result = scenarios.multi_stream(predict, data, n, rule, loadgen_dir("multi_stream", n))
    _report_batch(channel, "multi_stream", n, result)
    return [("multi_stream", n, result)]


def _server(channel: WorkerChannel, predict: Predictor, data: Any,
            config: InferConfig, rule: scenarios.StoppingRule) -> Measured:
    """One-sample queries at the target rate (default: half of what batch-1 single-stream
    sustains at its median latency, which one slow call cannot drag down; halved again while
    the runtime falls behind it: a server scenario's own overheads can make that too fast),
    batched dynamically when ``server_max_batch`` > 1; with a p99 bound, also the highest rate
    LoadGen judged VALID under it, each probe printed. Every rate measured (the target and each
    probe of the search) is a point of ``server_load/...`` with step = offered queries/s, so
    MLflow plots latency against offered load."""
    batching = {"max_batch": config.server_max_batch,
                "max_wait_s": config.server_max_wait_ms / 1000.0, "seed": config.seed,
                "p99_bound_ms": config.server_p99_bound_ms}
    target = config.server_target_qps
    if target <= 0:
        probe = scenarios.timed_single_stream(predict, data[:1],
                                              scenarios.StoppingRule(20, 0.2, 2))
        target = 0.5 * 1000.0 / probe.p50_ms
    result = scenarios.server(predict, data, target, rule, loadgen_dir("server", 1),
                              **batching)
    tried = [result]
    for _ in range(AUTO_RATE_BACKOFFS if config.server_target_qps <= 0 else 0):
        if result.achieved_qps >= KEPT_UP * target:
            break
        log.info("server: %.0f queries/s offered, %.0f served (it fell behind); trying %.0f",
                 target, result.achieved_qps, target / 2)
        target /= 2
        result = scenarios.server(predict, data, target, rule, loadgen_dir("server", 1),
                                  **batching)
        tried.append(result)
    channel.metrics({**result.latency.metrics("server"), SERVER_TARGET_QPS: target,
                     SERVER_ACHIEVED_QPS: result.achieved_qps,
                     SERVER_MEAN_BATCH: result.mean_batch_size})
    if config.server_p99_bound_ms > 0:
        del batching["p99_bound_ms"]
        search = scenarios.max_rate_within_bound(
            predict, data, config.server_p99_bound_ms, target, rule,
            loadgen_dir("server_rate_search", 1), report=_say_probe, first=result,
            **batching)
        tried = [p for p in tried if p not in search.probes] + list(search.probes)
        _report_search(channel, search, config.server_p99_bound_ms)
    for point in sorted(tried, key=lambda r: r.target_qps):
        channel.metrics({SERVER_LOAD_P99: point.latency.p99_ms,
                         SERVER_LOAD_ACHIEVED_QPS: point.achieved_qps,
                         SERVER_LOAD_QUERY_COUNT: float(point.latency.count)},
                        step=max(1, round(point.target_qps)))
    return [("server", 1, result.latency)]


def _say_probe(probe: scenarios.ServerResult, seconds_left: float) -> None:
    log.info("server rate search: %.1f queries/s offered, p99 %.2f ms over %d queries, %s; "
             "%.0f s of the search left", probe.target_qps, probe.latency.p99_ms,
             probe.latency.count, "VALID" if probe.valid else "INVALID", seconds_left)


def _report_search(channel: WorkerChannel, search: scenarios.RateSearch, bound_ms: float
                   ) -> None:
    """The highest VALID rate and the p99 at it; where none was, a tag says so (no metric)."""
    channel.metrics({"server/rate_search_probes": float(len(search.probes))})
    if search.best_qps is None:
        channel.tags({SERVER_RATE_SEARCH_TAG: search.describe_failure(bound_ms)})
        log.info("server rate search: %s", search.describe_failure(bound_ms))
        return
    best = max((p for p in search.probes if p.valid), key=lambda p: p.target_qps)
    channel.metrics({SERVER_MAX_QPS: best.target_qps,
                     SERVER_P99_AT_MAX_QPS: best.latency.p99_ms})
    channel.tags({SERVER_RATE_SEARCH_TAG: "stopped at its time budget"
                  if search.stopped_early else "converged"})


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
    source = resolve_source(config, runtime)
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
    source = resolve_source(config, runtime)
    predict = prepared(runtime, source, config)
    x = sample_inputs(runtime, source, config.seed + 1, 1)
    rule = scenarios.StoppingRule(config.min_query_count, config.min_duration_s,
                                  config.warmup_queries)
    queue.put("loaded")
    go.wait()
    queue.put(scenarios.timed_single_stream(predict, x, rule))


SCENARIO_RUNNERS = {"single_stream": _single_stream, "multi_stream": _multi_stream,
                    "offline": _offline, "server": _server, "ensemble": _ensemble}


def main(argv: Sequence[str] | None = None) -> int:
    """Benchmark per the ``--name value`` params; report figures, or the error, to the entry."""
    return serve("infer", argv, lambda params, channel: infer(
        InferConfig.from_params(params), channel))


if __name__ == "__main__":
    exit_without_teardown(main())
