"""The server scenario as the user asked for it, and what it reports.

- ``server_target_qps`` given: one LoadGen Server test at that rate.
- ``server_p99_bound_ms`` given: the capacity search (:mod:`~mlflow_dlaas.inference.capacity`),
  whose answer's test is the scenario's result; no other test runs beside it.
- neither: one test at an automatic rate (half of what batch-1 single-stream sustains at its
  median latency; halved while the runtime falls behind it).

Every rate measured is a point of ``server_load/...`` (step = offered queries/s) with its
LoadGen verdict (``server_load/loadgen_valid``, 1 or 0), so that MLflow plots latency against
offered load and an INVALID probe is never mistaken for a VALID one; the search's every probe,
with LoadGen's reason, is the artifact ``server/rate_search.json``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

from mlflow_dlaas.backends.served_model import Predictor
from mlflow_dlaas.inference import scenarios
from mlflow_dlaas.inference.capacity import Capacity, Probe, find_capacity
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.latency import LatencyResult
from mlflow_dlaas.measured_process.channel import WorkerChannel, worker_dir
from mlflow_dlaas.runs.schema import (
    SERVER_ACHIEVED_QPS,
    SERVER_LOAD_ACHIEVED_QPS,
    SERVER_LOAD_P99,
    SERVER_LOAD_QUERY_COUNT,
    SERVER_LOAD_VALID,
    SERVER_MAX_QPS,
    SERVER_MEAN_BATCH,
    SERVER_P99_AT_MAX_QPS,
    SERVER_RATE_SEARCH_TAG,
    SERVER_SEARCH_LOWEST_INVALID_QPS,
    SERVER_SEARCH_PROBES,
    SERVER_SEARCH_SECONDS,
    SERVER_TARGET_QPS,
)
from mlflow_dlaas.workloads.serving import loadgen_dir

log = logging.getLogger(__name__)
#: A server rate chosen automatically is halved, at most this many times, while the runtime
#: falls behind it (serves less than KEPT_UP of the offered rate, its queue growing).
AUTO_RATE_BACKOFFS = 3
KEPT_UP = 0.85
#: The artifact folder of the rate search's record.
SEARCH_ARTIFACT_DIR = "server"
SEARCH_FILE = "rate_search.json"


def serve_server(channel: WorkerChannel, predict: Predictor, data: Any, config: InferConfig,
                 rule: scenarios.StoppingRule) -> list[tuple[str, int, LatencyResult]]:
    """Run the server scenario as asked (see the module doc); its result for the run."""
    batching = {"max_batch": config.server_max_batch,
                "max_wait_s": config.server_max_wait_ms / 1000.0, "seed": config.seed}
    bound = config.server_p99_bound_ms
    points: list[tuple[scenarios.ServerResult, bool]] = []
    result: scenarios.ServerResult | None = None
    if config.server_target_qps > 0 or bound <= 0:
        result, tried = _at_one_rate(predict, data, config, rule, batching)
        points += [(r, r.valid) for r in tried]
    if bound > 0:
        capacity = _capacity(predict, data, config, rule, batching, start=(
            config.server_target_qps or _automatic_rate(predict, data)))
        _report_capacity(channel, capacity)
        points += [(p.result, p.valid) for p in capacity.probes]
        if result is None:  # the answer's test, or the probe nearest to one
            answer = capacity.best or min(capacity.probes, key=lambda p: p.rate)
            result = answer.result
    assert result is not None
    channel.metrics({**result.latency.metrics("server"), SERVER_TARGET_QPS: result.target_qps,
                     SERVER_ACHIEVED_QPS: result.achieved_qps,
                     SERVER_MEAN_BATCH: result.mean_batch_size})
    for point, valid in sorted(points, key=lambda p: p[0].target_qps):
        channel.metrics({SERVER_LOAD_P99: point.latency.p99_ms,
                         SERVER_LOAD_ACHIEVED_QPS: point.achieved_qps,
                         SERVER_LOAD_QUERY_COUNT: float(point.latency.count),
                         SERVER_LOAD_VALID: 1.0 if valid else 0.0},
                        step=max(1, round(point.target_qps)))
    return [("server", 1, result.latency)]


def _automatic_rate(predict: Predictor, data: Any) -> float:
    """Half of what batch-1 single-stream sustains at its median latency (one slow call
    cannot drag a median down)."""
    probe = scenarios.timed_single_stream(predict, data[:1], scenarios.StoppingRule(20, 0.2, 2))
    return 0.5 * 1000.0 / probe.p50_ms


def _at_one_rate(predict: Predictor, data: Any, config: InferConfig,
                 rule: scenarios.StoppingRule, batching: dict[str, Any]
                 ) -> tuple[scenarios.ServerResult, list[scenarios.ServerResult]]:
    """One test at the target rate, or at the automatic one, halved while the runtime falls
    behind (a server scenario's own overheads can make it too fast); every test run."""
    target = config.server_target_qps or _automatic_rate(predict, data)
    result = scenarios.server(predict, data, target, rule, loadgen_dir("server", 1),
                              p99_bound_ms=config.server_p99_bound_ms, **batching)
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
    return result, tried


def _capacity(predict: Predictor, data: Any, config: InferConfig,
              rule: scenarios.StoppingRule, batching: dict[str, Any], start: float
              ) -> Capacity:
    """The capacity search under the bound, each LoadGen test's logs in a folder of its own."""
    tests = iter(range(1, 10**6))
    root = loadgen_dir("server_rate_search", 1)

    def serve(rate: float, queries: int) -> scenarios.ServerResult:
        return scenarios.server(predict, data, rate, replace(rule, min_queries=queries),
                                root / f"probe_{next(tests)}",
                                p99_bound_ms=config.server_p99_bound_ms, **batching)

    return find_capacity(serve, start, config.server_p99_bound_ms, rule, report=_say_probe)


def _say_probe(probe: Probe, seconds_left: float) -> None:
    log.info("server rate search: %.1f queries/s offered, p99 %.2f ms over %d queries, %s; "
             "%.0f s of the search left", probe.rate, probe.result.latency.p99_ms,
             probe.result.latency.count, probe.reason(), seconds_left)


def _report_capacity(channel: WorkerChannel, capacity: Capacity) -> None:
    """The answer (highest VALID rate, p99 at it), its bracket, the search's probes and time;
    where no rate met the bound, a tag says so (no capacity metric)."""
    figures = {SERVER_SEARCH_PROBES: float(len(capacity.probes)),
               SERVER_SEARCH_SECONDS: capacity.seconds}
    best, over = capacity.best, capacity.lowest_over_bound_qps
    if best is not None:
        figures.update({SERVER_MAX_QPS: best.rate,
                        SERVER_P99_AT_MAX_QPS: best.result.latency.p99_ms})
    if over is not None:
        figures[SERVER_SEARCH_LOWEST_INVALID_QPS] = over
    channel.metrics(figures)
    channel.tags({SERVER_RATE_SEARCH_TAG: capacity.outcome()})
    log.info("server rate search: %s", capacity.outcome())
    out = worker_dir()
    (out / SEARCH_FILE).write_text(json.dumps({
        "p99_bound_ms": capacity.bound_ms, "seconds": round(capacity.seconds, 3),
        "outcome": capacity.outcome(), "highest_valid_qps": best.rate if best else None,
        "lowest_over_bound_qps": over,
        "probes": [{"offered_qps": p.rate, "queries": p.result.latency.count,
                    "lengthened": p.lengthened, "p99_ms": p.result.latency.p99_ms,
                    "achieved_qps": p.result.achieved_qps, "loadgen": p.reason()}
                   for p in capacity.probes]}, indent=2))
    channel.artifacts(out, SEARCH_ARTIFACT_DIR)
