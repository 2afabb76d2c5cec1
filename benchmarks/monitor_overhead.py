"""Slowdown of a CPU-bound workload under our monitor and under MLflow's system metrics.

Each measurement is a fresh process running the same fixed amount of work, in one of three
modes (none, ours, mlflow), interleaved round by round so that machine noise hits all modes
alike. Two workloads: one thread (a core stays free for the monitor) and every core busy
(the monitor must steal time). Prints median wall time per mode and the slowdown ratios, and
our monitor's own CPU (its thread's clock) as a share of one core and of the run's CPU time:
the figure a noisy machine's wall times cannot show.

    .venv/bin/python benchmarks/monitor_overhead.py [--rounds 7] [--interval 0.1] [--scale 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r'''
import json, os, sys, time
mode, interval, threads, uri = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
scale = float(sys.argv[5])
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
import numpy as np
import mlflow
mlflow.set_tracking_uri(uri)

def work():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((384, 384))
    for _ in range(round(600 * threads * scale)):
        a = np.tanh(a @ a.T / 384)
    total = 0
    for i in range(round(2_000_000 * scale)):  # pure Python: the GIL meets an in-process monitor
        total += i % 7
    return total

if mode == "mlflow":
    mlflow.set_system_metrics_sampling_interval(interval)
    mlflow.set_system_metrics_samples_before_logging(1)
with mlflow.start_run(log_system_metrics=(mode == "mlflow")):
    if mode == "ours":
        from mlflow_dlaas.monitor import ResourceMonitor
        monitor = ResourceMonitor(interval_s=interval).start()
    t0 = time.perf_counter()
    work()
    elapsed = time.perf_counter() - t0
    own = {}
    if mode == "ours":
        result = monitor.stop()
        times = os.times()
        own = {"monitor_cpu_s": result.monitor_cpu_seconds,
               "monitor_percent_of_core": result.cpu_percent_of_one_core,
               "process_cpu_s": times.user + times.system,
               "samples": len(result.timeline.samples)}
print(json.dumps({"elapsed_s": elapsed, **own}))
'''

MODES = ("none", "ours", "mlflow")


def measure(mode: str, interval: float, threads: int, uri: str, scale: float) -> dict:
    """One fresh process's figures: its work's wall time and, under our monitor, what the
    monitor spent itself (CPU seconds, share of one core, samples) and the process's CPU."""
    out = subprocess.run(
        [sys.executable, "-c", WORKER, mode, str(interval), str(threads), uri, str(scale)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="the amount of work, as a fraction of the measured default")
    args = parser.parse_args()
    import os

    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        for threads in (1, os.cpu_count() or 1):
            times: dict[str, list[float]] = {m: [] for m in MODES}
            own: list[dict] = []
            measure("none", args.interval, threads, uri, args.scale)  # warm caches, the store
            for _ in range(args.rounds):
                for mode in MODES:
                    found = measure(mode, args.interval, threads, uri, args.scale)
                    times[mode].append(found["elapsed_s"])
                    if mode == "ours":
                        own.append(found)
            base = statistics.median(times["none"])
            print(f"workload threads={threads} interval={args.interval}s rounds={args.rounds}")
            for mode in MODES:
                med = statistics.median(times[mode])
                spread = max(times[mode]) - min(times[mode])
                print(f"  {mode:7s} median {med:7.3f} s  range {spread:6.3f} s  "
                      f"slowdown {100 * (med / base - 1):+6.2f} %")
            share = statistics.median(o["monitor_percent_of_core"] for o in own)
            of_run = statistics.median(100 * o["monitor_cpu_s"] / o["process_cpu_s"] for o in own)
            print(f"  our monitor's own CPU: median {share:.3f} % of one core, "
                  f"{of_run:.3f} % of the process's CPU time "
                  f"({statistics.median(o['samples'] for o in own):.0f} samples; counted by "
                  "its thread's clock, which the machine's noise cannot blur)")


if __name__ == "__main__":
    main()
