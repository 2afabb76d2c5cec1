"""Wall time per study trial beyond its framework's start-up and its measured work, per env
manager, with the trial's timeline.

Runs a small study of the cheapest real trial (PyTorch, an MLP on digits, 5 steps) and, per
trial, compares Optuna's wall time with:
- measured work: warm-up + training + test time (the run's metrics);
- framework start-up: a bare script in its own process that imports PyTorch and builds the
  same MLP and its SGD optimizer (PyTorch imports its compiler stack at the first
  optimizer), timed from its start until the optimizer exists, alternated with the trials.
What is left (wall - measured work - framework start-up) is ours: Optuna, the child run,
process starts, MLflow's import and store, the data load, saving the model and its ONNX
export, logging. The timeline says where each trial's seconds went (medians over trials).

    .venv/bin/python benchmarks/trial_overhead.py [--trials 4] [--env-managers local virtualenv]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import mlflow

from mlflow_dlaas.runs.schema import TRAIN_TIME

BARE_FRAMEWORK_START = """
import torch
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 128), torch.nn.ReLU(),
                            torch.nn.Linear(128, 10))
torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
print("ready", flush=True)
"""
SPANS = (
    ("driver: Optuna trial -> child run created", "trial", "run_created"),
    ("process starts, light imports -> worker's load begins", "run_created", "load_start"),
    ("worker's load: framework import, data, model (entry: MLflow, store, monitor)",
     "load_start", "load_end"),
    ("worker holds until the monitor watches it", "load_end", "measured_start"),
    ("measured phases (warm-up, train, eval, test)", "measured_start", "measured_end"),
    ("save: model files, ONNX export, reference outputs", "save_start", "save_end"),
    ("worker exits -> run ended: summaries, artifacts, plot", "save_end", "run_ended"),
    ("run ended -> Optuna trial complete", "run_ended", "complete"),
)


def framework_start_s() -> float:
    """Wall seconds of the bare script, from its start until its optimizer exists (its
    interpreter's teardown is not counted: our worker skips it)."""
    t0 = time.perf_counter()
    with subprocess.Popen([sys.executable, "-c", BARE_FRAMEWORK_START],
                          stdout=subprocess.PIPE, text=True) as bare:
        assert bare.stdout is not None and bare.stdout.readline() == "ready\n"
        elapsed = time.perf_counter() - t0
    return elapsed


def trial_edges(client: mlflow.MlflowClient, trial: object, run_id: str, tmp: Path
                ) -> dict[str, float]:
    """Wall-clock times of one trial's edges (the keys of :data:`SPANS`)."""
    run = client.get_run(run_id)
    folder = Path(client.download_artifacts(run_id, "monitor", str(tmp / run_id)))
    with open(folder / "timeline.csv") as f:
        first = next(csv.DictReader(f))
    wall0 = float(first["wall_time_s"]) - float(first["t_s"])
    phases = json.loads((folder / "summary.json").read_text())["phases"]

    def edge(names: set[str], key: str, pick: type[min] | type[max]) -> float:
        return wall0 + pick(p[key] for p in phases if p["name"] in names)

    measured = {"warmup", "train", "eval", "test"}
    return {"trial": trial.datetime_start.timestamp(),  # type: ignore[attr-defined]
            "run_created": run.info.start_time / 1000,
            "load_start": edge({"load"}, "start_s", min), "load_end": edge({"load"}, "end_s", max),
            "measured_start": edge(measured, "start_s", min),
            "measured_end": edge(measured, "end_s", max),
            "save_start": edge({"save"}, "start_s", min), "save_end": edge({"save"}, "end_s", max),
            "run_ended": run.info.end_time / 1000,
            "complete": trial.datetime_complete.timestamp()}  # type: ignore[attr-defined]


def measure(env_manager: str, trials: int, workdir: Path) -> None:
    import optuna

    from mlflow_dlaas.optuna_access.storage import make_storage
    from mlflow_dlaas.tuning.spec import parse_spec
    from mlflow_dlaas.tuning.study import run_study

    name = f"overhead-{env_manager}"
    spec = parse_spec({
        "name": name, "frameworks": ["pytorch"], "env_manager": env_manager,
        "fixed": {"model": "mlp", "dataset": "digits", "epochs": 1, "max_steps": 5,
                  "warmup_steps": 0, "log_model": "false"},
        "search_space": {"batch_size": [16, 32]},
        "objectives": [{"metric": "accuracy", "direction": "maximize"}],
        "sampler": "random", "n_trials": 1, "seed": 0,
    })
    url = f"sqlite:///{workdir / 'optuna.db'}"
    bare = []
    for n in range(2, trials + 2):  # the first trial may build the environment: not counted
        run_study(replace(spec, n_trials=n), storage_url=url)
        bare.append(framework_start_s())
    storage, _ = make_storage(url)
    study = optuna.load_study(study_name=name, storage=storage)
    client = mlflow.MlflowClient()
    overhead, spans = [], {label: [] for label, _, _ in SPANS}
    framework = statistics.median(bare)
    for trial in study.trials[1:]:
        wall = (trial.datetime_complete - trial.datetime_start).total_seconds()
        (run_id,) = trial.user_attrs["mlflow_run_ids"]
        m = client.get_run(run_id).data.metrics
        work = m[TRAIN_TIME] + m["test_time_seconds"] + m["warmup_time_seconds"]
        overhead.append(wall - work - framework)
        edges = trial_edges(client, trial, run_id, workdir)
        for label, start, end in SPANS:
            spans[label].append(edges[end] - edges[start])
    walls = [(t.datetime_complete - t.datetime_start).total_seconds() for t in study.trials[1:]]
    print(f"{env_manager}: {len(overhead)} trials, wall {statistics.median(walls):.2f} s a trial "
          f"(median); framework start-up (bare script) {framework:.2f} s "
          f"(range {min(bare):.2f}-{max(bare):.2f})")
    print(f"{env_manager}: wall - measured work - framework start-up: median "
          f"{statistics.median(overhead):.2f} s (range {min(overhead):.2f}-{max(overhead):.2f})")
    for label, values in spans.items():
        print(f"  {statistics.median(values):6.2f} s  {label}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--env-managers", nargs="+", default=["local"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
        for env_manager in args.env_managers:
            measure(env_manager, args.trials, Path(tmp))


if __name__ == "__main__":
    main()
