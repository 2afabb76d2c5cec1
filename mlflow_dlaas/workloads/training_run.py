"""A training entry's MLflow run: its name, params and tags, the worker's supervision, its
description. Imported by :mod:`~mlflow_dlaas.workloads.train` once the worker has started.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlflow

from mlflow_dlaas.config import TrainConfig
from mlflow_dlaas.measured_process.start import StartedWorker, WorkerLaunch
from mlflow_dlaas.measured_process.supervisor import run_worker
from mlflow_dlaas.runs.schema import (
    ENTRY_TAG,
    FRAMEWORK_TAG,
    TRAIN_GFLOPS,
    WARNING_TAG,
)
from mlflow_dlaas.runs.validity import disturbed_warning
from mlflow_dlaas.store.lifecycle import failing_run_guard, log_new_params
from mlflow_dlaas.store.tracking import configure_tracking
from mlflow_dlaas.workloads.headline import headline_text
from mlflow_dlaas.workloads.peak import log_fraction_of_peak
from mlflow_dlaas.workloads.run_description import (
    describe_active_run,
    name_active_run,
    training_run_name,
    variant_label,
)


@dataclass(frozen=True)
class TrainingResult:
    """The run and the figures it logged (metric -> value)."""

    run_id: str
    figures: dict[str, float]
    #: ``disturbed: ...; not comparable`` where other work shared the CPU, else ''
    warning: str = ""

    def summary(self) -> str:
        """One line for the console: the headline figures the run measured, after the
        warning that they are not comparable where the run was disturbed."""
        shown = [f"{label} {value}" for label, value in headline_text(self.figures).items()]
        first = f"{self.warning}: " if self.warning else ""
        return f"run {self.run_id}: {first}{', '.join(shown) or 'no headline figure'}"


def run_training(config: TrainConfig, launch: WorkerLaunch,
                 worker: StartedWorker | None = None) -> TrainingResult:
    """Train per ``config`` inside the active (or a new) MLflow run; the run always ends.
    ``worker``: the one started for ``launch`` already, if any."""
    configure_tracking(announce=False)
    with failing_run_guard() as run:
        run_id = run.info.run_id
        name_active_run(training_run_name(
            config.framework, config.model, config.batch_size, config.parallelism,
            variant_label(device=config.device, jit_compile=config.jit_compile,
                          channels_last=config.channels_last, hybridize=config.hybridize,
                          precision=config.precision)))
        log_new_params(run_id, config.as_params())
        _tag_intent(config)
        run_worker(launch, run_id, worker)
        if config.device == "cpu":
            log_fraction_of_peak(run_id, TRAIN_GFLOPS, config.precision,
                                 config.parallelism.cpu_affinity)
        describe_active_run(f"Training {config.framework} {config.model} on {config.dataset}",
                            _key_settings(config))
    finished = mlflow.MlflowClient().get_run(run_id)
    return TrainingResult(run_id, dict(finished.data.metrics),
                          disturbed_warning(finished.data.tags))


def _key_settings(config: TrainConfig) -> dict[str, object]:
    """The settings a person compares runs by (all are in the run's params)."""
    threads = config.parallelism
    return {"framework": config.framework, "model": config.model, "dataset": config.dataset,
            "epochs": config.epochs, "batch size": config.batch_size,
            "learning rate": config.learning_rate, "optimizer": config.optimizer,
            "precision": config.precision,
            "intra-op threads": threads.intra_op_threads or "framework default",
            "inter-op threads": threads.inter_op_threads or "framework default",
            "CPU affinity": ",".join(map(str, threads.cpu_affinity or ())) or "all cores"}


def _tag_intent(config: TrainConfig) -> None:
    """What the run is, before the worker reports (so even a crashed run says it)."""
    tags: dict[str, str] = {FRAMEWORK_TAG: config.framework, ENTRY_TAG: "train"}
    warnings_ = config.parallelism.oversubscription_warnings()
    if warnings_:
        tags[WARNING_TAG] = "; ".join(warnings_)
    mlflow.set_tags(tags)
