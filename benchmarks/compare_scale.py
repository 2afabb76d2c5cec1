"""How long `mlflow-dlaas compare` takes on 1,000 runs (goal: seconds).

Logs N runs into a throw-away SQLite store, shaped like real ones: half training runs
(the monitor's summaries of 7 phases, about 220 metrics, the paper's columns, per-epoch
history) and half inference
runs (flat per-batch keys for three batch sizes), with replicates and a thread setting that
varies. Then times each stage of the report in one process: the paged search into pandas,
building tables / plots / recommendations, and writing the files.

    .venv/bin/python benchmarks/compare_scale.py [--runs 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from mlflow_dlaas.runs import schema


def log_runs(n: int) -> str:
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    client = MlflowClient()
    experiment_id = client.create_experiment("scale")
    rng = np.random.default_rng(0)
    now = int(time.time() * 1000)
    for i in range(n):
        train = i % 2 == 0
        system = ["pytorch", "tensorflow", "mxnet"][i % 3] if train else \
            ["pytorch", "onnxruntime", "openvino"][i % 3]
        params = {"framework" if train else "runtime": system, "seed": str(i % 3),
                  "intra_op_threads": str(1 + i % 2), "batch_size": str(32 * (1 + i % 4))}
        metrics = {f"{phase}/{stat}_{key}": float(rng.random() * 1e9)
                   for phase in (("run", "load", "warmup", "train", "eval", "test", "save")
                                 if train else ("run", "load", "check", "single_stream",
                                                "offline"))
                   for stat in ("peak", "mean", "p95")
                   for key in ("proc_rss_bytes", "proc_cpu_percent", "proc_threads",
                               "proc_hwm_rss_bytes", "proc_processes", "sys_cpu_percent",
                               "sys_cpu0_percent", "sys_cpu1_percent", "sys_memory_used_bytes",
                               "sys_memory_available_bytes")}
        history = []
        if train:
            metrics.update({schema.TEST_ACCURACY: 0.9 + rng.random() / 10,
                            schema.TRAIN_TIME: 2 + rng.random(),
                            "test_time_seconds": 0.1 + rng.random() / 10,
                            schema.TIME_TO_ACCURACY: 1 + rng.random()})
            for epoch in range(1, 5):
                history += [Metric("test_accuracy", 0.8 + epoch / 50, now, epoch),
                            Metric("cumulative_train_time_seconds", epoch * 0.7, now, epoch)]
        else:
            for batch in (1, 8, 32):
                for scenario in ("single_stream", "offline"):
                    for key in ("latency_p50_ms", "latency_p90_ms", "latency_p95_ms",
                                "latency_p99_ms", "throughput_samples_per_second"):
                        metrics[f"{scenario}/batch_{batch}/{key}"] = float(rng.random() * batch)
            metrics["load_time_seconds"] = float(rng.random())
        run = client.create_run(experiment_id, tags={
            "dlaas.entry": "train" if train else "infer",
            f"dlaas.{'framework' if train else 'runtime'}": system})
        client.log_batch(run.info.run_id,
                         metrics=[Metric(k, v, now, 0) for k, v in metrics.items()] + history,
                         params=[Param(k, v) for k, v in params.items()],
                         tags=[RunTag("mlflow.runName", f"run-{i}")])
        client.set_terminated(run.info.run_id, "FINISHED")
    return experiment_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
        t0 = time.perf_counter()
        log_runs(args.runs)
        print(f"logged {args.runs} runs in {time.perf_counter() - t0:.1f} s (not timed below)")
        from mlflow import MlflowClient

        from mlflow_dlaas.report.collect import collect_runs
        from mlflow_dlaas.report.publish import write_report
        from mlflow_dlaas.report.report import build_report

        client = MlflowClient()
        t0 = time.perf_counter()
        table = collect_runs(client, experiment="scale")
        t1 = time.perf_counter()
        report = build_report(client, table, os.environ["MLFLOW_TRACKING_URI"])
        t2 = time.perf_counter()
        write_report(report, Path(tmp) / "report")
        t3 = time.perf_counter()
        print(f"{len(table.runs)} runs, {table.runs.shape[1]} columns: search into pandas "
              f"{t1 - t0:.2f} s, tables + plots + recommendations {t2 - t1:.2f} s, "
              f"write {t3 - t2:.2f} s; total {t3 - t0:.2f} s")


if __name__ == "__main__":
    main()
