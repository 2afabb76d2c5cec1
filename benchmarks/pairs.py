"""Our workload and an independent bare script, each in a fresh process, alternating.

Shared by ``memory_fidelity.py``, ``harness_tax.py`` and ``latency_fidelity.py``. Our side is
the entry point a project runs (``python -m mlflow_dlaas.workloads.train|infer``) on a
throw-away SQLite store, its figures read back from the run; the bare side is a textbook
script under ``benchmarks/bare/`` whose peak memory comes from the kernel (``wait4``).
Rounds alternate the order (ours, bare / bare, ours) so both see the same machine noise.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlflow_dlaas.runs import schema

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MIB = 2**20
TRAIN_PARAMS = ["--batch_size", "64", "--learning_rate", "0.01",
                "--momentum", "0.9", "--warmup_steps", "5", "--log_model", "false"]
#: ResNet-50 on synthetic ImageNet-size data: warm-up, then a bounded number of steps
#: the frameworks ``bare/train_resnet50.py`` writes ResNet-50 in
RESNET50_BARE_FRAMEWORKS = ("pytorch", "tensorflow", "mxnet")
RESNET50_PARAMS = ["--model", "resnet50", "--dataset", "synthetic_imagenet", "--epochs", "0",
                   "--batch_size", "16", "--warmup_steps", "2",
                   "--learning_rate", "0.01", "--momentum", "0.9", "--log_model", "false"]


@dataclass(frozen=True)
class Figures:
    """One process's figures: the measured window's peak RSS, the whole process's, and the
    speed figures it reported."""

    peak_rss_bytes: float
    process_peak_rss_bytes: float
    values: dict[str, float]
    validity: str = ""


def mxnet_python() -> str | None:
    """The interpreter of the MXNet virtualenv that ``mlflow run projects/mxnet`` built."""
    root = Path(os.environ.get("MLFLOW_ENV_ROOT", Path.home() / ".mlflow" / "envs"))
    for python in sorted(root.glob("*/bin/python")):
        if list(python.parent.parent.glob("lib/python*/site-packages/mxnet")):
            return str(python)
    return None


def _run_bare(command: list[str], window_peak: str) -> Figures:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2",
                                 "ORT_DISABLE_TELEMETRY": "1"})  # as our worker
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed")
    values = json.loads(out.strip().splitlines()[-1])
    return Figures(values.pop(window_peak), usage.ru_maxrss * 1024.0, values)


def _run_ours(python: str, module: str, args: list[str], keys: dict[str, str]) -> Figures:
    with tempfile.TemporaryDirectory(prefix="dlaas-bench-") as store:
        uri = f"sqlite:///{store}/mlflow.db"
        env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([python, "-m", module, *args], env=env, cwd=store,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{module} failed: {done.stderr[-2000:]}")
        import mlflow

        client = mlflow.MlflowClient(uri)
        run = client.search_runs([e.experiment_id for e in client.search_experiments()])[0]
        metrics = run.data.metrics
        return Figures(metrics[schema.PEAK_MEMORY] * schema.BYTES_PER_MEGABYTE,
                       metrics["run/peak_proc_rss_megabytes"] * schema.BYTES_PER_MEGABYTE,
                       {name: metrics[key] for name, key in keys.items()},
                       run.data.tags.get("dlaas.validity", ""))


def train_pair(framework: str, python: str, model: str = "lenet5", epochs: int = 3,
               steps: int = 10) -> tuple[Callable[[], Figures], Callable[[], Figures]]:
    """(ours, bare) for LeNet-5 training in ``framework`` (``epochs`` timed epochs), or
    ResNet-50 (``steps`` timed steps; the bare side is a hand-written ResNet-50 in each
    framework; MXNet's runs in its virtualenv)."""
    if model == "resnet50":
        if framework not in RESNET50_BARE_FRAMEWORKS:
            raise ValueError(f"the ResNet-50 bare script has no {framework} side")
        params = [*RESNET50_PARAMS, "--max_steps", str(steps)]
        bare_command = [python, str(HERE / "bare" / "train_resnet50.py"), "--framework",
                        framework, "--steps", str(steps)]
    else:
        params = ["--epochs", str(epochs), *TRAIN_PARAMS]
        bare_command = [python, str(HERE / "bare" / "train_lenet.py"), "--framework",
                        framework, "--epochs", str(epochs)]
    keys = {"train_samples_per_second": schema.TRAIN_THROUGHPUT}
    if model == "resnet50":  # one train phase: its CPU time beside the bare script's
        keys["train_cpu_seconds"] = f"train/{schema.PHASE_CPU_TIME}"
    ours = lambda: _run_ours(python, "mlflow_dlaas.workloads.train",  # noqa: E731
                             ["--framework", framework, *params], keys)
    bare = lambda: _run_bare(bare_command, "train_peak_rss_bytes")  # noqa: E731
    return ours, bare


#: How each model is served on both sides: the offline batch, the queries per scenario (at
#: least, and at least 1 s) and the warm-up queries. ResNet-50 takes about 1.5 s a batch-32
#: query on 2 cores, so fewer queries there.
SERVING = {"lenet5": (64, 300, 20), "resnet50": (32, 20, 5)}


def infer_pair(runtime: str, onnx: Path, model: str = "lenet5"
               ) -> tuple[Callable[[], Figures], Callable[[], Figures]]:
    """(ours, bare) serving ``model`` in ``runtime``: batch-1 single-stream p50 and offline
    throughput at the model's batch (:data:`SERVING`)."""
    batch, queries, warmup = SERVING[model]
    keys = {"single_stream_p50_ms": "single_stream/batch_1/latency_p50_ms",
            "offline_samples_per_second":
                f"offline/batch_{batch}/throughput_samples_per_second"}
    ours = lambda: _run_ours(sys.executable, "mlflow_dlaas.workloads.infer",  # noqa: E731
                             ["--runtime", runtime, "--model", model, "--scenarios",
                              "single_stream,offline", "--batch_sizes", f"1,{batch}",
                              "--min_query_count", str(queries), "--min_duration_s", "1",
                              "--warmup_queries", str(warmup)], keys)
    bare = lambda: _run_bare([sys.executable, str(HERE / "bare" / "infer_lenet.py"),  # noqa: E731
                              "--runtime", runtime, "--onnx", str(onnx), "--model", model,
                              "--offline_batch", str(batch), "--min_queries", str(queries),
                              "--warmup", str(warmup)],
                             "scenario_peak_rss_bytes")
    return ours, bare


def fresh_onnx(directory: Path, model: str = "lenet5") -> Path:
    """``model`` exported to ONNX by our exporter, in a process of its own."""
    subprocess.run([sys.executable, "-m", "mlflow_dlaas.inference.sources.fresh", "--model",
                    model, "--out", str(directory)], check=True, env={
                        **os.environ, "PYTHONPATH": str(ROOT)})
    return directory / "onnx" / "model.onnx"


def alternate(ours: Callable[[], Figures], bare: Callable[[], Figures], rounds: int
              ) -> tuple[list[Figures], list[Figures]]:
    """``rounds`` of each, in ABBA order."""
    mine: list[Figures] = []
    theirs: list[Figures] = []
    for r in range(rounds):
        steps = [(ours, mine), (bare, theirs)]
        for run, into in steps if r % 2 == 0 else reversed(steps):
            into.append(run())
    return mine, theirs


def _value(f: Figures, key: str) -> float:
    return getattr(f, key) / MIB if key.endswith("rss_bytes") else f.values[key]


def median(figures: list[Figures], key: str) -> float:
    """The median of ``key`` (RSS figures in MiB)."""
    return statistics.median(_value(f, key) for f in figures)


def spread(figures: list[Figures], key: str) -> str:
    values = [_value(f, key) for f in figures]
    return f"{min(values):.1f}-{max(values):.1f}"
