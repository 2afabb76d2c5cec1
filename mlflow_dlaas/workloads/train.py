"""The training entry point: one framework, one config, one measured MLflow run.

Run as ``python -m mlflow_dlaas.workloads.train --framework pytorch --batch_size 32 ...``
(what every ``projects/<framework>`` ``train`` entry point does). This process validates the
params and starts the measured worker (:mod:`~mlflow_dlaas.workloads.train_worker`) with the
parallel settings in force before it imports MLflow, so that the worker's framework import
and this process's MLflow import overlap; then it owns the MLflow run and the monitor
(:mod:`~mlflow_dlaas.workloads.training_run`). The worker holds before its first measured
phase until the monitor watches it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from mlflow_dlaas.backends import get_framework
from mlflow_dlaas.config import TrainConfig
from mlflow_dlaas.data import SHAPES
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.measured_process.lifeline import exit_without_teardown
from mlflow_dlaas.measured_process.start import StartedWorker, WorkerLaunch
from mlflow_dlaas.models import get_model
from mlflow_dlaas.models.memory import training_memory
from mlflow_dlaas.parallelism import worker_environment
from mlflow_dlaas.workloads.entry import run_entry_point
from mlflow_dlaas.workloads.pruning_link import PruningLink

WORKER = "mlflow_dlaas.workloads.train_worker"
#: Phases whose disturbance makes a run ``disturbed``; the train phase's peak memory, CPU
#: seconds and energy are the run's ``measured_*`` figures.
MEASURED_PHASES = ("train", "eval", "test")
HEADLINE_PHASES = ("train",)


def training_launch(config: TrainConfig, pruning: PruningLink | None) -> WorkerLaunch:
    """How to start the worker for ``config``; ``pruning``, where a study's driver linked
    its pruner, decides after each epoch."""
    adapter = get_framework(config.framework)
    adapter.refuse_unserved(config.precision)  # before the worker, the run, anything starts
    return WorkerLaunch(
        module=WORKER, config=config.as_params(),
        environment=worker_environment(config.parallelism,
                                       adapter.environment(config.parallelism)),
        cpu_affinity=config.parallelism.cpu_affinity, measured_phases=MEASURED_PHASES,
        headline_phases=HEADLINE_PHASES, monitor_interval_s=config.monitor_interval,
        stall_timeout_s=config.stall_timeout_s, thresholds=config.validity,
        checkpoint=None if pruning is None else pruning.check)


def refuse_a_batch_that_cannot_fit(config: TrainConfig) -> None:
    """On the CPU, refuse a batch whose least memory (:func:`training_memory`) exceeds what
    the machine has available now, with the batch size that would fit."""
    if config.device != "cpu":
        return  # the accelerator's memory is the framework's to report
    import psutil

    shape, classes = SHAPES[config.dataset]
    spec = get_model(config.model)
    need = training_memory(spec, shape, classes, config.batch_size, config.optimizer)
    available = psutil.virtual_memory().available
    if need.total <= available:
        return
    per_sample = need.activations // config.batch_size
    fits = max((available - need.parameters) // per_sample, 0)
    advice = (f"lower batch_size to at most {fits}" if fits else
              "this model's weights alone do not fit: use a smaller model")
    raise ConfigError(
        f"model {config.model} at batch_size {config.batch_size} on {config.dataset} needs at "
        f"least {need.describe()}; this machine has {available / 2**20:,.0f} MiB available "
        f"now: {advice}")


def _start(params: Mapping[str, str], cleanup: contextlib.ExitStack
           ) -> tuple[TrainConfig, WorkerLaunch, StartedWorker]:
    config = TrainConfig.from_params(params)
    refuse_a_batch_that_cannot_fit(config)
    pruning = PruningLink.from_environment()  # before the worker starts: it must not see it
    launch = training_launch(config, pruning)
    started = cleanup.enter_context(StartedWorker(launch))
    if pruning is not None:
        pruning.open()  # while the worker imports its framework; before MLflow is imported
    return config, launch, started


def _train(started: tuple[TrainConfig, WorkerLaunch, StartedWorker]) -> Any:
    from mlflow_dlaas.workloads.training_run import run_training  # MLflow: the worker runs

    return run_training(*started)


def _done(result: Any) -> str:
    return result.summary()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``projects/<framework>``'s ``train``."""
    return run_entry_point("train", argv, _train, _done, start=_start)


if __name__ == "__main__":
    exit_without_teardown(main())
