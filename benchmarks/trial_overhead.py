"""Wall time per study trial minus the trial's own work, per env manager.

Runs a small study of the cheapest real trial (PyTorch, an MLP on digits, 5 steps) and, per
trial, compares Optuna's wall time with what the child run measured itself:
- monitored: the child's monitor window (framework import, data load, training, saving);
- measured work: warm-up + training + test time.
The difference to the monitored window is the harness's own cost (Optuna, MLflow Projects,
process start, `import mlflow`); the difference to the measured work adds the framework import.

    .venv/bin/python benchmarks/trial_overhead.py [--trials 4] [--env-managers local virtualenv]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

import mlflow


def monitored_seconds(client: mlflow.MlflowClient, run_id: str) -> float:
    """The child's monitor window (``run/duration_seconds``), from its ``summary.json``: the
    run's metrics keep only the headline figures."""
    with tempfile.TemporaryDirectory() as tmp:
        path = client.download_artifacts(run_id, "summary.json", tmp)
        return float(json.loads(Path(path).read_text())["monitor"]["run/duration_seconds"])


def measure(env_manager: str, trials: int, workdir: Path) -> None:
    from mlflow_dlaas.tuning.spec import parse_spec
    from mlflow_dlaas.tuning.storage import make_storage
    from mlflow_dlaas.tuning.study import run_study

    name = f"overhead-{env_manager}"
    spec = parse_spec({
        "name": name, "frameworks": ["pytorch"], "env_manager": env_manager,
        "fixed": {"model": "mlp", "dataset": "digits", "epochs": 1, "max_steps": 5,
                  "warmup_steps": 0, "log_model": "false"},
        "search_space": {"batch_size": [16, 32]},
        "objectives": [{"metric": "accuracy", "direction": "maximize"}],
        "sampler": "random", "n_trials": trials + 1, "seed": 0,
    })
    run_study(spec, storage_url=f"sqlite:///{workdir / 'optuna.db'}")
    storage, _ = make_storage(f"sqlite:///{workdir / 'optuna.db'}")
    import optuna

    study = optuna.load_study(study_name=name, storage=storage)
    client = mlflow.MlflowClient()
    harness, total = [], []
    for trial in study.trials[1:]:  # the first trial may build the environment
        wall = (trial.datetime_complete - trial.datetime_start).total_seconds()
        (run_id,) = trial.user_attrs["mlflow_run_ids"]
        m = client.get_run(run_id).data.metrics
        work = m["train_time_seconds"] + m["test_time_seconds"] + m["warmup_time_seconds"]
        harness.append(wall - monitored_seconds(client, run_id))
        total.append(wall - work)
    print(f"{env_manager:10s} trials {len(harness)}: wall - monitored window: median "
          f"{statistics.median(harness):.2f} s (range {min(harness):.2f}-{max(harness):.2f}); "
          f"wall - measured work: median {statistics.median(total):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--env-managers", nargs="+", default=["local"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        for env_manager in args.env_managers:
            measure(env_manager, args.trials, Path(tmp))


if __name__ == "__main__":
    main()
