"""The training entry point: one framework, one config, one measured MLflow run.

Run as ``python -m mlflow_dlaas.workloads.train --framework pytorch --batch_size 32 ...``
(what every ``projects/<framework>`` ``train`` entry point does). This process validates the
params, owns the MLflow run and the monitor; the measured work runs in
:mod:`~mlflow_dlaas.workloads.train_worker`, started with the parallel settings in force.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import mlflow

from mlflow_dlaas.config import TrainConfig, as_cli_params
from mlflow_dlaas.frameworks import get_framework
from mlflow_dlaas.parallelism import worker_environment
from mlflow_dlaas.run_description import (
    describe_active_run,
    name_active_run,
    training_run_name,
)
from mlflow_dlaas.run_lifecycle import failing_run_guard, log_new_params
from mlflow_dlaas.tracking import configure_tracking
from mlflow_dlaas.tuning.pruning_link import PruningLink
from mlflow_dlaas.worker.lifeline import exit_without_teardown
from mlflow_dlaas.worker.supervisor import WorkerLaunch, run_worker
from mlflow_dlaas.workloads.entry import run_entry_point
from mlflow_dlaas.workloads.train_worker import TrainingFigures

WORKER = "mlflow_dlaas.workloads.train_worker"
#: Phases whose disturbance makes a run ``disturbed``; the train phase's peak memory, CPU
#: seconds and energy are the run's ``measured_*`` figures.
MEASURED_PHASES = ("train", "eval", "test")
HEADLINE_PHASES = ("train",)


@dataclass(frozen=True)
class TrainingResult:
    """The run and the paper's columns the measured worker reported."""

    run_id: str
    figures: TrainingFigures


def run_training(config: TrainConfig) -> TrainingResult:
    """Train per ``config`` inside the active (or a new) MLflow run; the run always ends."""
    adapter = get_framework(config.framework)
    configure_tracking(announce=False)
    with failing_run_guard() as run:
        run_id = run.info.run_id
        name_active_run(training_run_name(config.framework, config.model, config.batch_size,
                                          config.parallelism))
        params = config.as_params()
        log_new_params(run_id, params)
        _tag_intent(config)
        pruning = PruningLink.from_environment()  # a study's trial with a pruner, else None
        launch = WorkerLaunch(
            module=WORKER, argv=as_cli_params(params),
            environment=worker_environment(config.parallelism,
                                           adapter.environment(config.parallelism)),
            cpu_affinity=config.parallelism.cpu_affinity, measured_phases=MEASURED_PHASES,
            headline_phases=HEADLINE_PHASES, monitor_interval_s=config.monitor_interval,
            stall_timeout_s=config.stall_timeout_s, thresholds=config.validity,
            checkpoint=None if pruning is None else pruning.check)
        outcome = run_worker(launch, run_id)
        describe_active_run(f"Training {config.framework} {config.model} on {config.dataset}",
                            _key_settings(config))
    return TrainingResult(run_id, TrainingFigures(**outcome.result))


def _key_settings(config: TrainConfig) -> dict[str, object]:
    """The settings a person compares runs by (all are in the run's params)."""
    threads = config.parallelism
    return {"framework": config.framework, "model": config.model, "dataset": config.dataset,
            "epochs": config.epochs, "batch size": config.batch_size,
            "learning rate": config.learning_rate, "optimizer": config.optimizer,
            "intra-op threads": threads.intra_op_threads or "framework default",
            "inter-op threads": threads.inter_op_threads or "framework default",
            "CPU affinity": ",".join(map(str, threads.cpu_affinity or ())) or "all cores"}


def _tag_intent(config: TrainConfig) -> None:
    """What the run is, before the worker starts (so even a crashed run says it)."""
    tags: dict[str, str] = {"dlaas.framework": config.framework, "dlaas.entry": "train"}
    warnings_ = config.parallelism.oversubscription_warnings()
    if warnings_:
        tags["dlaas.warning"] = "; ".join(warnings_)
    mlflow.set_tags(tags)


def _train(params: Mapping[str, str]) -> TrainingResult:
    return run_training(TrainConfig.from_params(params))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``projects/<framework>``'s ``train``."""
    return run_entry_point(
        "train", argv, _train,
        lambda r: f"run {r.run_id}: test accuracy {r.figures.final_test_accuracy:.4f}, "
                  f"train {r.figures.train_time_s:.2f} s, test {r.figures.test_time_s:.3f} s")


if __name__ == "__main__":
    exit_without_teardown(main())
