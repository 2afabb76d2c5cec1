"""The inference workload: one runtime, a batch-size sweep, MLPerf-style scenarios, one run.

Run as ``python -m mlflow_dlaas.workloads.infer --runtime onnxruntime --batch_sizes 1,8``
(what every project's ``infer`` entry point does). Metrics carry the same keys for every
runtime; per batch size they are logged with step = batch size, so the MLflow UI plots them
against it, and under ``{scenario}/batch_{size}/...`` so that a run search returns every
batch size at once. Each scenario's latency CDF is the artifact ``latency/cdf.csv``.
"""

from __future__ import annotations

import csv
import logging
import multiprocessing
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlflow
import numpy as np

from mlflow_dlaas.environment import as_tags, fingerprint
from mlflow_dlaas.inference import equivalence, scenarios
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.latency import CDF_POINTS, LatencyResult
from mlflow_dlaas.inference.runtimes import InferenceOptions, InferenceRuntime, get_runtime
from mlflow_dlaas.inference.source import (
    ModelSource,
    fresh_inputs,
    fresh_native_source,
    fresh_torch_source,
    run_id_from,
    run_source,
    workdir,
)
from mlflow_dlaas.monitor import ResourceMonitor
from mlflow_dlaas.parallelism import apply_process_settings, process_settings_in_force
from mlflow_dlaas.run_lifecycle import failing_run_guard, log_new_params
from mlflow_dlaas.tracking import configure_tracking
from mlflow_dlaas.workloads.entry import exit_without_teardown, run_entry_point

log = logging.getLogger(__name__)
OFFLINE_POOL = 4  # offline queries cycle through this many distinct batches
CDF_ARTIFACT = "latency/cdf.csv"
#: what a scenario runner measured: (scenario, batch size, result) per measurement
Measured = list[tuple[str, int, LatencyResult]]


def resolve_source(config: InferConfig, runtime: InferenceRuntime, directory: Path
                   ) -> ModelSource:
    from mlflow_dlaas.inference.source import parse_shape

    if config.model_uri:
        return run_source(run_id_from(config.model_uri), directory)
    shape = parse_shape(config.input_shape) if config.input_shape else None
    if runtime.consumes in ("onnx", "pytorch"):
        return fresh_torch_source(config.model, shape, config.seed, directory)
    return fresh_native_source(config.model, shape, config.seed, runtime.name)


def options_of(config: InferConfig) -> InferenceOptions:
    return InferenceOptions(config.precision, config.device, config.graph_optimization_level,
                            config.execution_mode, config.torch_compile, config.jit_compile,
                            config.parallelism)


def run_inference(config: InferConfig) -> str:
    """Benchmark per ``config`` in the active (or a new) run; the run always ends."""
    runtime = get_runtime(config.runtime)
    apply_process_settings(config.parallelism, runtime.environment(config.parallelism))
    configure_tracking(announce=False)
    with failing_run_guard(run_name=f"{config.runtime}-{config.model}-infer") as run:
        run_id = run.info.run_id
        log_new_params(run_id, {**config.as_params(), "min_query_count": config.min_query_count,
                                "min_duration_s": config.min_duration_s})
        rule = scenarios.StoppingRule(config.min_query_count, config.min_duration_s,
                                      config.warmup_queries)
        with ResourceMonitor(interval_s=config.monitor_interval) as monitor:
            with monitor.phase("load"):
                t0 = time.perf_counter()
                runtime.load()
                source = resolve_source(config, runtime, workdir())
                predict = runtime.prepare(source, options_of(config))
                load_s = time.perf_counter() - t0
            _describe(run_id, runtime, source, load_s)
            with monitor.phase("check"):
                _check(predict, runtime, source, config)
            data = runtime.layout(fresh_inputs(source.input_shape, config.seed + 1,
                                               max(config.batch_sizes) * OFFLINE_POOL))
            measured: Measured = []
            for scenario in config.scenarios:
                with monitor.phase(scenario):
                    measured += SCENARIO_RUNNERS[scenario](predict, data, config, rule)
            _log_totals_and_cdf(measured)
    return run_id


def _log_batch_result(scenario: str, batch: int, result: LatencyResult) -> None:
    """One batch size's figures: as history (step = batch size) and under flat keys."""
    mlflow.log_metrics(result.metrics(scenario), step=batch)
    mlflow.log_metrics(result.metrics(f"{scenario}/batch_{batch}"))


def _log_totals_and_cdf(measured: Measured) -> None:
    """``{scenario}/samples_total`` (for energy per prediction) and the latency CDFs."""
    totals: dict[str, float] = defaultdict(float)
    for scenario, _, result in measured:  # ensemble members count towards "ensemble"
        totals[f"{scenario.split('/')[0]}/samples_total"] += result.samples
    if totals:
        mlflow.log_metrics(dict(totals))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(CDF_ARTIFACT).name
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["scenario", "batch_size", "percentile", "latency_ms"])
            for scenario, batch, result in measured:
                writer.writerows([scenario, batch, int(q), round(v, 6)]
                                 for q, v in zip(CDF_POINTS, result.cdf_ms, strict=True))
        mlflow.log_artifact(str(path), str(Path(CDF_ARTIFACT).parent))


def _describe(run_id: str, runtime: InferenceRuntime, source: ModelSource, load_s: float
              ) -> None:
    in_force = {**runtime.threads_in_force(), **process_settings_in_force()}
    log_new_params(run_id, {f"in_force_{k}": v for k, v in in_force.items()})
    log_new_params(run_id, {"input_shape": "x".join(map(str, source.input_shape)),
                            "reference_framework": source.reference_framework})
    mlflow.set_tags({"dlaas.entry": "infer", "dlaas.runtime": runtime.name,
                     "dlaas.runtime_version": runtime.version(), **as_tags(fingerprint())})
    mlflow.log_metric("load_time_seconds", load_s)


def _check(predict: scenarios.Predictor, runtime: InferenceRuntime, source: ModelSource,
           config: InferConfig) -> None:
    reference = source.reference_outputs if source.reference_outputs.size else runtime.reference()
    outputs = predict(runtime.layout(source.reference_inputs))
    result = equivalence.compare(outputs, reference, precision=config.precision,
                                 rtol=config.rtol, atol=config.atol)
    mlflow.log_metrics(result.metrics())
    mlflow.set_tag("dlaas.equivalence_rule", result.rule)
    equivalence.require(result, runtime.name, source.reference_framework)


def _single_stream(predict: scenarios.Predictor, data: np.ndarray, config: InferConfig,
                   rule: scenarios.StoppingRule) -> Measured:
    measured: Measured = []
    for batch in config.batch_sizes:
        result = scenarios.single_stream(predict, data[:batch], rule)
        _log_batch_result("single_stream", batch, result)
        measured.append(("single_stream", batch, result))
    return measured


def _offline(predict: scenarios.Predictor, data: np.ndarray, config: InferConfig,
             rule: scenarios.StoppingRule) -> Measured:
    measured: Measured = []
    for batch in config.batch_sizes:
        result = scenarios.offline(predict, data, batch, rule)
        _log_batch_result("offline", batch, result)
        measured.append(("offline", batch, result))
    return measured


def _server(predict: scenarios.Predictor, data: np.ndarray, config: InferConfig,
            rule: scenarios.StoppingRule) -> Measured:
    """Batch-1 queries; the rate defaults to half of what single-stream sustains."""
    x = data[:1]
    target = config.server_target_qps
    if target <= 0:
        probe = scenarios.single_stream(predict, x, scenarios.StoppingRule(20, 0.2, 2))
        target = 0.5 * 1000.0 / probe.mean_ms
    result = scenarios.server(predict, x, target, rule, seed=config.seed)
    mlflow.log_metrics({**result.latency.metrics("server"), "server/target_qps": target,
                        "server/achieved_qps": result.achieved_qps})
    if config.server_p99_bound_ms > 0:
        best, tried = scenarios.max_rate_within_bound(predict, x, config.server_p99_bound_ms,
                                                      target, rule)
        mlflow.log_metrics({"server/max_qps_within_p99_bound": best,
                            "server/rate_search_probes": float(len(tried))})
    return [("server", 1, result.latency)]


def _ensemble(predict: scenarios.Predictor, data: np.ndarray, config: InferConfig,
              rule: scenarios.StoppingRule) -> Measured:
    """K copies served at once, as threads of this process or as K processes.

    Every copy is loaded first; then all start together, each in single-stream, so the
    measured windows overlap. Aggregate throughput = all samples / the longest window.
    """
    x = data[:1]
    k = config.ensemble_size
    if config.ensemble_mode == "threads":
        runtime = get_runtime(config.runtime)
        runtime.load()
        source = resolve_source(config, runtime, workdir())
        members = [predict] + [runtime.prepare(source, options_of(config)) for _ in range(k - 1)]
        results: list[LatencyResult] = []
        lock = threading.Lock()

        def serve(member: scenarios.Predictor) -> None:
            result = scenarios.single_stream(member, x, rule)
            with lock:
                results.append(result)

        threads = [threading.Thread(target=serve, args=(m,)) for m in members]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        context = multiprocessing.get_context("spawn")
        queue, go = context.Queue(), context.Event()
        procs = [context.Process(target=_ensemble_member, args=(config, queue, go))
                 for _ in range(k)]
        for p in procs:
            p.start()
        for _ in procs:  # every member has loaded its copy
            queue.get(timeout=600)
        go.set()
        results = [queue.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
    window = max(r.duration_s for r in results)
    metrics = {"ensemble/size": float(k),
               "ensemble/throughput_samples_per_second":
                   sum(r.count * r.samples_per_query for r in results) / window}
    for i, r in enumerate(results):
        metrics[f"ensemble/model{i}_latency_p99_ms"] = r.p99_ms
        metrics[f"ensemble/model{i}_latency_p50_ms"] = r.p50_ms
    mlflow.log_metrics(metrics)
    return [(f"ensemble/model{i}", 1, r) for i, r in enumerate(results)]


def _ensemble_member(config: InferConfig, queue: Any, go: Any) -> None:
    """One member process: load its own copy, say so, wait for the start, serve, report."""
    runtime = get_runtime(config.runtime)
    apply_process_settings(config.parallelism, runtime.environment(config.parallelism))
    runtime.load()
    source = resolve_source(config, runtime, workdir())
    predict = runtime.prepare(source, options_of(config))
    x = runtime.layout(fresh_inputs(source.input_shape, config.seed + 1, 1))
    rule = scenarios.StoppingRule(config.min_query_count, config.min_duration_s,
                                  config.warmup_queries)
    queue.put("loaded")
    go.wait()
    queue.put(scenarios.single_stream(predict, x, rule))


SCENARIO_RUNNERS = {"single_stream": _single_stream, "offline": _offline, "server": _server,
                    "ensemble": _ensemble}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of every project's ``infer``."""
    return run_entry_point(
        "infer", argv, lambda params: run_inference(InferConfig.from_params(params)),
        lambda run_id: f"run {run_id}: inference benchmark done")


if __name__ == "__main__":
    exit_without_teardown(main())
