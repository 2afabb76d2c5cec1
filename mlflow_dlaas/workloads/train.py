"""The training workload: one framework, one config, one measured MLflow run.

Run as ``python -m mlflow_dlaas.workloads.train --framework pytorch --batch_size 32 ...``
(what every ``projects/<framework>`` ``train`` entry point does). Parallelism settings are
applied before the framework is imported; the settings in force are read back and logged.
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
import numpy as np

from mlflow_dlaas.config import TrainConfig
from mlflow_dlaas.data import Dataset, load_dataset
from mlflow_dlaas.environment import as_tags, fingerprint
from mlflow_dlaas.errors import ConfigError, WorkloadError
from mlflow_dlaas.frameworks import BuildOptions, FrameworkAdapter, Trainer, get_framework
from mlflow_dlaas.inference.source import ONNX_DIR, log_reference
from mlflow_dlaas.models import get_model
from mlflow_dlaas.monitor import ResourceMonitor
from mlflow_dlaas.parallelism import apply_process_settings, process_settings_in_force
from mlflow_dlaas.run_lifecycle import failing_run_guard, log_new_params
from mlflow_dlaas.tracking import configure_tracking
from mlflow_dlaas.workloads.entry import exit_without_teardown, run_entry_point

log = logging.getLogger(__name__)
EVAL_BATCH = 500


@dataclass(frozen=True)
class TrainingResult:
    """The paper's columns for one run."""

    run_id: str
    final_test_accuracy: float
    train_time_s: float
    test_time_s: float
    time_to_accuracy_s: float | None
    epochs: int
    steps: int


def run_training(config: TrainConfig) -> TrainingResult:
    """Train per ``config`` inside the active (or a new) MLflow run; the run always ends."""
    adapter = get_framework(config.framework)
    spec = get_model(config.model)
    apply_process_settings(config.parallelism, adapter.environment(config.parallelism))
    configure_tracking(announce=False)
    with failing_run_guard(run_name=f"{config.framework}-{config.model}") as run:
        log_new_params(run.info.run_id, config.as_params())
        with ResourceMonitor(interval_s=config.monitor_interval) as monitor:
            with monitor.phase("load"):
                dataset = load_dataset(config.dataset, data_dir=config.data_dir or None,
                                       seed=config.seed)
                spec.shapes(dataset.input_shape, dataset.num_classes)  # fails early if too small
                trainer = _prepare(adapter, config, spec, dataset)
            log_new_params(run.info.run_id, dataset.describe())
            result = _train_and_evaluate(run.info.run_id, trainer, config, dataset, monitor)
            with monitor.phase("save"):
                _save(trainer, config, dataset)
    return result


def _prepare(adapter: FrameworkAdapter, config: TrainConfig, spec: Any,
             dataset: Dataset) -> Trainer:
    adapter.load()
    if not adapter.device_available(config.device):
        raise ConfigError(f"device {config.device!r} is not available to {adapter.name} here; "
                          "use -P device=cpu")
    adapter.configure_threads(config.parallelism)
    options = BuildOptions(config.optimizer, config.learning_rate, config.momentum,
                           config.weight_decay, config.seed, config.device, config.jit_compile,
                           config.channels_last, config.hybridize)
    trainer = adapter.build(spec, dataset.input_shape, dataset.num_classes, options)
    in_force = {**adapter.threads_in_force(), **process_settings_in_force()}
    log_new_params(mlflow.active_run().info.run_id,
                   {f"in_force_{k}": v for k, v in in_force.items()})
    warnings_ = config.parallelism.oversubscription_warnings()
    tags = {"dlaas.framework": adapter.name, "dlaas.framework_version": adapter.version(),
            "dlaas.entry": "train", **as_tags(fingerprint())}
    if warnings_:
        tags["dlaas.warning"] = "; ".join(warnings_)
    mlflow.set_tags(tags)
    mlflow.log_metric("parameter_count", trainer.parameter_count())
    return trainer


def _train_and_evaluate(run_id: str, trainer: Trainer, config: TrainConfig, dataset: Dataset,
                        monitor: ResourceMonitor) -> TrainingResult:
    rng = np.random.default_rng(config.seed)
    warmup_s = 0.0
    if config.warmup_steps:
        with monitor.phase("warmup"):
            t0 = time.perf_counter()
            idx = rng.permutation(len(dataset.x_train))[: config.warmup_steps * config.batch_size]
            trainer.train_steps(dataset.x_train[idx], dataset.y_train[idx], config.batch_size)
            warmup_s = time.perf_counter() - t0
    train_s = 0.0
    steps = epoch = 0
    time_to_accuracy: float | None = None
    test_accuracy = 0.0
    while (config.epochs == 0 or epoch < config.epochs) and (
        config.max_steps == 0 or steps < config.max_steps
    ):
        epoch += 1
        perm = rng.permutation(len(dataset.x_train))
        x, y = dataset.x_train[perm], dataset.y_train[perm]
        remaining = config.max_steps - steps if config.max_steps else None
        with monitor.phase("train"):
            t0 = time.perf_counter()
            stats = trainer.train_steps(x, y, config.batch_size, remaining)
            epoch_s = time.perf_counter() - t0
        train_s += epoch_s
        steps += stats.steps
        if not math.isfinite(stats.mean_loss):
            raise WorkloadError(
                f"training diverged: loss is {stats.mean_loss} in epoch {epoch} "
                f"(learning_rate={config.learning_rate}); lower the learning rate"
            )
        with monitor.phase("eval"):
            test_accuracy = _accuracy(trainer, dataset)
        if time_to_accuracy is None and test_accuracy >= config.target_accuracy:
            time_to_accuracy = train_s
        mlflow.log_metrics({
            "train_loss": stats.mean_loss,
            "train_accuracy": stats.accuracy,
            "test_accuracy": test_accuracy,
            "epoch_time_seconds": epoch_s,
            "train_samples_per_second": stats.samples / epoch_s if epoch_s else 0.0,
            "cumulative_train_time_seconds": train_s,
        }, step=epoch)
        log.info("epoch %d: loss %.4f test accuracy %.4f (%.2f s)", epoch, stats.mean_loss,
                 test_accuracy, epoch_s)
    with monitor.phase("test"):
        t0 = time.perf_counter()
        test_accuracy = _accuracy(trainer, dataset)
        test_s = time.perf_counter() - t0
    final = {
        "final_test_accuracy": test_accuracy,
        "train_time_seconds": train_s,
        "total_train_time_seconds": train_s + warmup_s,
        "warmup_time_seconds": warmup_s,
        "test_time_seconds": test_s,
        "test_samples_per_second": len(dataset.x_test) / test_s if test_s else 0.0,
        "train_samples_per_second_overall": steps * config.batch_size / train_s if train_s else 0,
        "epochs_completed": float(epoch),
        "steps_completed": float(steps),
        "target_reached": float(time_to_accuracy is not None),
    }
    if time_to_accuracy is not None:
        final["time_to_accuracy_seconds"] = time_to_accuracy
    mlflow.log_metrics(final)
    return TrainingResult(run_id, test_accuracy, train_s, test_s, time_to_accuracy, epoch, steps)


def _accuracy(trainer: Trainer, dataset: Dataset) -> float:
    logits = trainer.predict(dataset.x_test, EVAL_BATCH)
    return float((logits.argmax(1) == dataset.y_test).mean())


def _save(trainer: Trainer, config: TrainConfig, dataset: Dataset) -> None:
    """The model, its ONNX export where the framework can, and reference outputs.

    The reference (inputs and this framework's outputs on them) lets any inference runtime
    check itself against the source framework later.
    """
    example = dataset.x_test[:8]
    tags = {}
    if config.log_model:
        tags["dlaas.model_flavor"] = trainer.log_model("model", example)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        log_reference(out, example, trainer.predict(example, len(example)))
        try:
            trainer.export_onnx(out / "model.onnx", example)
            tags["dlaas.onnx"] = "onnx/model.onnx"
        except NotImplementedError as e:
            tags["dlaas.onnx"] = f"not exported: {e}"[:500]
        mlflow.log_artifacts(tmp, ONNX_DIR)
    mlflow.set_tags(tags)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``projects/<framework>``'s ``train``."""
    return run_entry_point(
        "train", argv, lambda params: run_training(TrainConfig.from_params(params)),
        lambda r: f"run {r.run_id}: test accuracy {r.final_test_accuracy:.4f}, "
                  f"train {r.train_time_s:.2f} s, test {r.test_time_s:.3f} s")


if __name__ == "__main__":
    exit_without_teardown(main())
