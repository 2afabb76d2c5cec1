"""The server's capacity under a p99 bound: our search against MLPerf LoadGen's own
``TestMode.FindPeakPerformance`` on the same system under test, each in a fresh process, and
the deterministic-service SUT against its M/D/1 queue's closed form.

SUTs: ``sleep`` (one server holding 2 ms a query by its own clock; bound 10 ms), and
``onnxruntime`` and ``openvino`` (LeNet-5 exported to ONNX, batch 1, the runtime's default
threads; bound 5 ms). Both searches start at half the batch-1 single-stream rate and use
LoadGen's Server scenario with at least 1,000 queries and 0.5 s per test.
FindPeakPerformance judges a rate by its latency bound alone and ends with one test at the
peak it found (often INVALID by early stopping); ours asks every rate to be VALID, early
stopping included, lengthening probes LoadGen finds too short. Goal: ours within 15 % of
FindPeakPerformance's peak, and the ``sleep`` SUT within 15 % of the M/D/1 capacity.

    .venv/bin/python benchmarks/server_capacity.py [--suts sleep onnxruntime openvino]
        [--rounds 2] [--min-queries 1000] [--budget 120]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BOUNDS_MS = {"sleep": 10.0, "onnxruntime": 5.0, "openvino": 5.0}
SLEEP_S = 0.002
MIN_DURATION_S = 0.5
_PEAK = re.compile(r"Found peak performance field: ([\d.]+)")


def sut(name: str, onnx: str | None):
    """The predictor of ``name`` and a pool of samples for it."""
    if name == "sleep":
        clock = [0.0]

        def hold(x: np.ndarray) -> np.ndarray:
            clock[0] = max(time.perf_counter(), clock[0]) + SLEEP_S
            time.sleep(max(0.0, clock[0] - time.perf_counter()))
            return x

        return hold, np.zeros((4, 1, 28, 28), np.float32)
    pool = np.random.default_rng(0).random((4, 1, 28, 28), dtype=np.float32)
    if name == "openvino":
        import openvino as ov

        compiled = ov.Core().compile_model(onnx, "CPU")
        request = compiled.create_infer_request()
        return (lambda x: request.infer({0: x})[compiled.output(0)]), pool
    import onnxruntime as ort

    session = ort.InferenceSession(onnx, providers=["CPUExecutionProvider"])
    feed_name = session.get_inputs()[0].name
    return (lambda x: session.run(None, {feed_name: x})[0]), pool


def one_side(side: str, name: str, onnx: str | None, out: Path, min_queries: int,
             budget_s: float) -> dict:
    """One search in this process: ours (``find_capacity``) or LoadGen's FindPeakPerformance."""
    sys.path.insert(0, str(ROOT))
    from mlflow_dlaas.inference import scenarios
    from mlflow_dlaas.inference.capacity import find_capacity

    predict, pool = sut(name, onnx)
    bound = BOUNDS_MS[name]
    single = scenarios.timed_single_stream(predict, pool[:1], scenarios.StoppingRule(300, 1, 20))
    start = 0.5 * 1000.0 / single.p50_ms
    rule = scenarios.StoppingRule(min_queries, MIN_DURATION_S, 20)
    began = time.monotonic()
    extra: dict = {}
    if side == "ours":
        tests = iter(range(1, 10**6))
        capacity = find_capacity(
            lambda rate, n: scenarios.server(
                predict, pool, rate, scenarios.StoppingRule(n, MIN_DURATION_S, 20),
                out / f"probe_{next(tests)}", p99_bound_ms=bound),
            start, bound, rule, budget_s=budget_s)
        found = capacity.best.rate if capacity.best else None
        extra = {"bracket_high_qps": capacity.lowest_over_bound_qps,
                 "probes": len(capacity.probes), "outcome": capacity.outcome()}
    else:
        found = _find_peak(predict, pool, start, bound, out, min_queries)
    return {"qps": found, "seconds": time.monotonic() - began,
            "single_stream_p50_ms": single.p50_ms, **extra}


def _find_peak(predict, pool: np.ndarray, start: float, bound_ms: float, out: Path,
               min_queries: int) -> float | None:
    import mlperf_loadgen as lg

    from mlflow_dlaas.inference import scenarios

    for _ in range(20):
        predict(pool[:1])
    batcher = scenarios._DynamicBatcher(predict, pool, 1, 0.0)
    settings = lg.TestSettings()
    settings.scenario, settings.mode = lg.TestScenario.Server, lg.TestMode.FindPeakPerformance
    settings.server_target_qps = start  # the lower bound it checks first
    settings.server_target_latency_ns = int(bound_ms * 1e6)
    settings.min_query_count, settings.min_duration_ms = min_queries, int(MIN_DURATION_S * 1e3)
    out.mkdir(parents=True, exist_ok=True)
    logs = lg.LogSettings()
    logs.log_output.outdir, logs.log_output.copy_summary_to_stdout = str(out), False
    logs.enable_trace = False
    system = lg.ConstructSUT(batcher.issue, lambda: None)
    library = lg.ConstructQSL(len(pool), len(pool), lambda _: None, lambda _: None)
    try:
        lg.StartTestWithLogSettings(system, library, settings, logs)
    finally:
        lg.DestroyQSL(library)
        lg.DestroySUT(system)
        batcher.close()
    found = _PEAK.search((out / "mlperf_log_detail.txt").read_text())
    return float(found.group(1)) if found else None


def md1_capacity(service: float, bound: float, quantile: float = 0.99) -> float:
    """The M/D/1 queue's highest rate whose ``quantile`` time in the system is within
    ``bound`` (Erlang's waiting-time distribution)."""
    def within(rate: float) -> float:
        t = bound - service
        total = sum((rate * (k * service - t)) ** k / math.factorial(k)
                    * math.exp(-rate * (k * service - t)) for k in range(int(t // service) + 1))
        return (1 - rate * service) * total

    low, high = 0.0, 1 / service
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if within(middle) >= quantile else (low, middle)
    return low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suts", nargs="+", default=["sleep", "onnxruntime", "openvino"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--min-queries", type=int, default=1000)
    parser.add_argument("--budget", type=float, default=120.0, help="our search's, in seconds")
    parser.add_argument("--side", choices=("ours", "loadgen"), help=argparse.SUPPRESS)
    parser.add_argument("--onnx", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:  # one search, in a process of its own
        print(json.dumps(one_side(args.side, args.suts[0], args.onnx, Path(args.out),
                                  args.min_queries, args.budget)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        onnx = None
        if set(args.suts) - {"sleep"}:
            sys.path.insert(0, str(Path(__file__).parent))
            from pairs import fresh_onnx

            onnx = str(fresh_onnx(Path(tmp) / "model"))
        for name in args.suts:
            results: dict[str, list[dict]] = {"ours": [], "loadgen": []}
            for r in range(args.rounds):
                for side in ("ours", "loadgen") if r % 2 == 0 else ("loadgen", "ours"):
                    done = subprocess.run(
                        [sys.executable, __file__, "--side", side, "--suts", name,
                         "--onnx", onnx or "", "--out", f"{tmp}/{name}-{side}-{r}",
                         "--min-queries", str(args.min_queries), "--budget", str(args.budget)],
                        capture_output=True, text=True, check=True)
                    results[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
            _print(name, results)


def _median_found(runs: list[dict]) -> float:
    """The median of the rates found (a search that found none, e.g. FindPeakPerformance
    whose base rate failed, is listed but not counted); NaN where none found one."""
    found = [r["qps"] for r in runs if r["qps"]]
    return float(np.median(found)) if found else float("nan")


def _print(name: str, results: dict[str, list[dict]]) -> None:
    ours = _median_found(results["ours"])
    peak = _median_found(results["loadgen"])
    p50 = float(np.median([r["single_stream_p50_ms"] for r in results["ours"]]))
    runs = {side: ", ".join((f"{r['qps']:.4g}" if r["qps"] else "none") +
                            f" in {r['seconds']:.0f} s" for r in found)
            for side, found in results.items()}
    line = (f"{name:12s} bound {BOUNDS_MS[name]:g} ms  ours {ours:.4g} q/s ({runs['ours']})  "
            f"FindPeakPerformance {peak:.4g} q/s ({runs['loadgen']})  "
            f"ours/LoadGen {ours / peak:.3f}  single-stream p50 {p50:.3g} ms, "
            f"1/(4 p50) {250.0 / p50:.4g} q/s")
    if name == "sleep":
        theory = md1_capacity(SLEEP_S, BOUNDS_MS[name] / 1000.0)
        line += f"  M/D/1 {theory:.4g} q/s, ours/theory {ours / theory:.3f}"
    print(line, flush=True)


if __name__ == "__main__":
    main()
