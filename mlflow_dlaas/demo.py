"""The main job on the embedded default: ``make demo`` / ``mlflow-dlaas demo``.

Trains LeNet-5 on the embedded MNIST sample in PyTorch and TensorFlow, serves the PyTorch
run's ONNX export with ONNX Runtime and OpenVINO (and PyTorch natively), each as a real
``mlflow run`` of its project, then prints the side-by-side answer.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import mlflow

from mlflow_dlaas.errors import WorkloadError
from mlflow_dlaas.tracking import configure_tracking, ensure_experiment
from mlflow_dlaas.tuning.trial_runner import projects_dir

DEMO_EXPERIMENT = "dlaas-demo"
TRAIN = {"model": "lenet5", "dataset": "mnist5k", "epochs": 2, "batch_size": 64,
         "learning_rate": 0.01, "momentum": 0.9, "target_accuracy": 0.9}
INFER = {"batch_sizes": "1,8,32", "scenarios": "single_stream,offline,server",
         "min_query_count": 100, "min_duration_s": 1.0}
TRAIN_FRAMEWORKS = ("pytorch", "tensorflow")
RUNTIMES = ("pytorch", "onnxruntime", "openvino")


def _mlflow_run(project: str, entry: str, params: Mapping[str, Any], experiment_id: str) -> str:
    """One ``mlflow run`` of ``projects/<project>``; returns the run id."""
    print(f"demo: {project} {entry} ...", file=sys.stderr)
    submitted = mlflow.projects.run(
        str(projects_dir() / project), entry_point=entry,
        parameters={k: str(v) for k, v in params.items()}, experiment_id=experiment_id,
        env_manager="local", synchronous=False)
    if not submitted.wait():
        raise WorkloadError(f"the demo's {project} {entry} run {submitted.run_id} failed; "
                            "see its dlaas.failure_reason tag")
    return submitted.run_id


def run_demo() -> dict[str, str]:
    """Train, serve, compare; returns run ids by role."""
    target = configure_tracking()
    # `mlflow run --env-manager local` runs `python` from PATH: make it this environment's
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    experiment_id = ensure_experiment(DEMO_EXPERIMENT)
    runs = {f"train/{fw}": _mlflow_run(fw, "train", TRAIN, experiment_id)
            for fw in TRAIN_FRAMEWORKS}
    served = {"model_uri": f"runs:/{runs['train/pytorch']}"}
    for runtime in RUNTIMES:
        runs[f"infer/{runtime}"] = _mlflow_run(runtime, "infer", {**INFER, **served},
                                               experiment_id)
    _print_answer(runs)
    print(f"demo: runs are in experiment {DEMO_EXPERIMENT!r}; to see them: "
          f"{target.ui_command()}", file=sys.stderr)
    return runs


def _print_answer(runs: Mapping[str, str]) -> None:
    client = mlflow.MlflowClient()
    print("\ntraining: lenet5 on mnist5k, 2 epochs")
    print(f"{'framework':12s} {'accuracy':>9s} {'train s':>8s} {'test s':>7s} "
          f"{'to 90% s':>9s} {'peak RSS MiB':>13s}")
    for role, run_id in runs.items():
        if role.startswith("train/"):
            m = client.get_run(run_id).data.metrics
            print(f"{role[6:]:12s} {m['final_test_accuracy']:9.4f} "
                  f"{m['train_time_seconds']:8.2f} {m['test_time_seconds']:7.3f} "
                  f"{m.get('time_to_accuracy_seconds', float('nan')):9.2f} "
                  f"{m['run/peak_proc_rss_bytes'] / 2**20:13.0f}")
    print("\ninference: the PyTorch run's model, batch 1 single-stream and offline throughput")
    print(f"{'runtime':12s} {'p50 ms':>8s} {'p99 ms':>8s} {'samples/s @32':>14s} {'load s':>7s}")
    for role, run_id in runs.items():
        if role.startswith("infer/"):
            history = {h.step: h.value for h in client.get_metric_history(
                run_id, "offline/throughput_samples_per_second")}
            ss = {k: {h.step: h.value for h in client.get_metric_history(run_id, k)}
                  for k in ("single_stream/latency_p50_ms", "single_stream/latency_p99_ms")}
            m = client.get_run(run_id).data.metrics
            print(f"{role[6:]:12s} {ss['single_stream/latency_p50_ms'][1]:8.3f} "
                  f"{ss['single_stream/latency_p99_ms'][1]:8.3f} {history.get(32, 0):14.0f} "
                  f"{m['load_time_seconds']:7.2f}")
    print()


__all__ = ["run_demo"]
