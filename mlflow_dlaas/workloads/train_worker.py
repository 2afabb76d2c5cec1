"""The measured training worker: data, build, warm-up, training, evaluation, saving.

Started by :mod:`mlflow_dlaas.workloads.train` (the entry point, which owns the MLflow run)
as ``python -m mlflow_dlaas.workloads.train_worker --framework pytorch --batch_size 32 ...``
with the parallel settings already in its environment and affinity. It imports numpy, the
framework and light parts of mlflow_dlaas; MLflow only in the save phase, after everything
measured. It reports over :class:`~mlflow_dlaas.measured_process.channel.WorkerChannel`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from mlflow_dlaas.backends import BuildOptions, FrameworkAdapter, Trainer, get_framework
from mlflow_dlaas.backends.builds import framework_builds
from mlflow_dlaas.config import TrainConfig
from mlflow_dlaas.data import Dataset, load_dataset
from mlflow_dlaas.environment import FINGERPRINT_DIR, as_tags, fingerprint, write_fingerprint
from mlflow_dlaas.errors import ConfigError, WorkloadError
from mlflow_dlaas.hardware import cores_in_use, fp32_peak_gflops
from mlflow_dlaas.inference.sources.manifest import ONNX_DIR, log_reference
from mlflow_dlaas.measured_process.channel import WorkerChannel, worker_dir
from mlflow_dlaas.measured_process.lifeline import exit_without_teardown
from mlflow_dlaas.measured_process.main import serve
from mlflow_dlaas.models import get_model
from mlflow_dlaas.models.spec import ArchitectureSpec
from mlflow_dlaas.parallelism import process_settings_in_force
from mlflow_dlaas.runs.schema import (
    ACCURACY_NOT_MEASURED,
    ACCURACY_TAG,
    CORES_IN_USE,
    CUMULATIVE_TRAIN_TIME,
    EPOCH_TEST_ACCURACY,
    EPOCH_THROUGHPUT,
    EPOCH_TIME,
    EPOCHS_COMPLETED,
    FORWARD_FLOPS,
    FRAMEWORK_VERSION_TAG,
    MODEL_FLAVOR_TAG,
    NOMINAL_PEAK_GFLOPS,
    ONNX_TAG,
    PARAMETER_COUNT,
    PEAK_TAG,
    STEPS_COMPLETED,
    TARGET_REACHED,
    TEST_ACCURACY,
    TEST_GFLOPS,
    TEST_THROUGHPUT,
    TEST_TIME,
    TIME_TO_ACCURACY,
    TOTAL_TRAIN_TIME,
    TRAIN_ACCURACY,
    TRAIN_GFLOPS,
    TRAIN_LOSS,
    TRAIN_THROUGHPUT,
    TRAIN_TIME,
    TRAINING_FLOPS,
    WARMUP_ENDED,
    WARMUP_STEPS_TAKEN,
    WARMUP_TIME,
)
from mlflow_dlaas.workloads.library_report import report_libraries
from mlflow_dlaas.workloads.progress import Progress
from mlflow_dlaas.workloads.shuffled_feed import train_in_order
from mlflow_dlaas.workloads.warmup import warm_up

log = logging.getLogger(__name__)
#: The smallest batch evaluation runs in, so that a run training at batch 1 does not evaluate
#: its test set one sample at a time.
MIN_EVAL_BATCH = 64


@dataclass(frozen=True)
class TrainingFigures:
    """The paper's columns for one run (no accuracy on synthetic data)."""

    final_test_accuracy: float | None
    train_time_s: float
    test_time_s: float
    time_to_accuracy_s: float | None
    epochs: int
    steps: int


def train(config: TrainConfig, channel: WorkerChannel) -> TrainingFigures:
    """Everything measured, in phases: load, warmup, train / eval per epoch, test; then save."""
    adapter = get_framework(config.framework)
    spec = get_model(config.model)
    with channel.phase("load"):
        dataset = load_dataset(config.dataset, data_dir=config.data_dir or None, seed=config.seed)
        spec.shapes(dataset.input_shape, dataset.num_classes)  # fails early if too small
        trainer = prepare_trainer(adapter, config, spec, dataset)
    cost = _describe(channel, adapter, config, dataset, trainer, spec)
    channel.wait_until_watched()
    figures = _train_and_evaluate(channel, trainer, config, dataset, cost)
    with channel.phase("save"):
        _save(channel, trainer, config, dataset)
    return figures


def prepare_trainer(adapter: FrameworkAdapter, config: TrainConfig, spec: Any,
                    dataset: Dataset) -> Trainer:
    """The framework loaded and configured, and the model built in it; ConfigError for a
    precision or device the framework cannot train with here."""
    adapter.refuse_unserved(config.precision)
    adapter.load()
    if not adapter.device_available(config.device):
        raise ConfigError(f"device {config.device!r} is not available to {adapter.name} here; "
                          "use -P device=cpu")
    adapter.configure_threads(config.parallelism)
    options = BuildOptions(config.optimizer, config.learning_rate, config.momentum,
                           config.weight_decay, config.seed, config.device, config.jit_compile,
                           config.channels_last, config.hybridize, config.precision)
    return adapter.build(spec, dataset.input_shape, dataset.num_classes, options)


@dataclass(frozen=True)
class ComputeCost:
    """The model's FLOPs per sample."""

    forward_flops: int
    training_flops: int


def _describe(channel: WorkerChannel, adapter: FrameworkAdapter, config: TrainConfig,
              dataset: Dataset, trainer: Trainer, spec: ArchitectureSpec) -> ComputeCost:
    """Dataset, settings in force (read back here, in the measured process), fingerprint,
    the model's FLOPs, the cores the run can use and their nominal peak (the entry holds
    the train phase's rate against the measured ceiling afterwards)."""
    in_force = {**adapter.threads_in_force(), **process_settings_in_force(),
                "precision": trainer.precision_in_force()}
    channel.params({**dataset.describe(), **{f"in_force_{k}": v for k, v in in_force.items()}})
    channel.send("dataset", **dataset.input_report(config.data_dir))
    host = {**fingerprint(), **framework_builds()}
    channel.tags({FRAMEWORK_VERSION_TAG: adapter.version(), **as_tags(host)})
    channel.artifacts(write_fingerprint(worker_dir() / FINGERPRINT_DIR, host), FINGERPRINT_DIR)
    shape, classes = dataset.input_shape, dataset.num_classes
    cost = ComputeCost(spec.forward_flops(shape, classes), spec.training_flops(shape, classes))
    figures: dict[str, float] = {PARAMETER_COUNT: trainer.parameter_count(),
                                 FORWARD_FLOPS: cost.forward_flops,
                                 TRAINING_FLOPS: cost.training_flops}
    if config.device == "cpu":
        cores = cores_in_use(host, in_force.get("intra_op_threads"))
        nominal, _ = fp32_peak_gflops(host, cores)
        channel.params({CORES_IN_USE: cores})
        if nominal:
            figures[NOMINAL_PEAK_GFLOPS] = nominal
    else:
        channel.tags({PEAK_TAG: f"no peak: only CPU peaks are measured, this run used "
                                f"{config.device}"})
    channel.metrics(figures)
    if not dataset.measures_accuracy:
        channel.tags({ACCURACY_TAG: ACCURACY_NOT_MEASURED})
    report_libraries(channel, config.parallelism, adapter.name, adapter.native_library,
                     adapter.libraries_in_force())
    return cost


def _train_and_evaluate(channel: WorkerChannel, trainer: Trainer, config: TrainConfig,
                        dataset: Dataset, cost: ComputeCost) -> TrainingFigures:
    rng = np.random.default_rng(config.seed)
    warmup_s = 0.0
    if config.warmup_steps:
        with channel.phase("warmup"):
            t0 = time.perf_counter()
            warmup = warm_up(trainer, dataset.x_train, dataset.y_train,
                             rng.permutation(len(dataset.x_train)), config.batch_size,
                             config.warmup_steps, config.warmup_budget_s)
            warmup_s = time.perf_counter() - t0
        channel.params({WARMUP_STEPS_TAKEN: warmup.steps, WARMUP_ENDED: warmup.why})
        log.info("warm-up: %d step(s) in %.1f s (%s)", warmup.steps, warmup_s, warmup.why)
    train_s = 0.0
    steps = epoch = samples = 0
    time_to_accuracy: float | None = None
    test_accuracy: float | None = None
    while (config.epochs == 0 or epoch < config.epochs) and (
        config.max_steps == 0 or steps < config.max_steps
    ):
        epoch += 1
        order = rng.permutation(len(dataset.x_train))
        remaining = config.max_steps - steps if config.max_steps else None
        planned = -(-len(order) // config.batch_size)
        progress = Progress(f"train epoch {epoch}", min(planned, remaining or planned))
        with channel.phase("train"):
            t0 = time.perf_counter()
            stats = train_in_order(trainer, dataset.x_train, dataset.y_train, order,
                                   config.batch_size, remaining, progress)
            epoch_s = time.perf_counter() - t0
        train_s += epoch_s
        steps += stats.steps
        samples += stats.samples
        if not math.isfinite(stats.mean_loss):
            raise WorkloadError(
                f"training diverged: loss is {stats.mean_loss} in epoch {epoch} "
                f"(learning_rate={config.learning_rate}); lower the learning rate"
            )
        accuracy = {}
        if dataset.measures_accuracy:
            with channel.phase("eval"):
                test_accuracy = _accuracy(trainer, dataset, config.batch_size)
            if time_to_accuracy is None and test_accuracy >= config.target_accuracy:
                time_to_accuracy = train_s
            accuracy = {TRAIN_ACCURACY: stats.accuracy, EPOCH_TEST_ACCURACY: test_accuracy}
        channel.metrics({
            TRAIN_LOSS: stats.mean_loss,
            **accuracy,
            EPOCH_TIME: epoch_s,
            EPOCH_THROUGHPUT: stats.samples / epoch_s if epoch_s else 0.0,
            CUMULATIVE_TRAIN_TIME: train_s,
        }, step=epoch)
        log.info("epoch %d: loss %.4f test accuracy %s (%.2f s)", epoch, stats.mean_loss,
                 "not measured" if test_accuracy is None else f"{test_accuracy:.4f}", epoch_s)
        channel.checkpoint(epoch)  # a study's pruner may stop us here, before the next epoch
    with channel.phase("test"):
        t0 = time.perf_counter()
        accuracy_at_end = _accuracy(trainer, dataset, config.batch_size)
        test_s = time.perf_counter() - t0
    final = {
        TRAIN_TIME: train_s,
        TOTAL_TRAIN_TIME: train_s + warmup_s,
        WARMUP_TIME: warmup_s,
        TEST_TIME: test_s,
        TEST_THROUGHPUT: len(dataset.x_test) / test_s if test_s else 0.0,
        TRAIN_THROUGHPUT: samples / train_s if train_s else 0.0,
        EPOCHS_COMPLETED: float(epoch),
        STEPS_COMPLETED: float(steps),
    }
    final.update(_achieved(cost, samples, train_s, len(dataset.x_test), test_s))
    if dataset.measures_accuracy:
        test_accuracy = accuracy_at_end
        final.update({TEST_ACCURACY: test_accuracy,
                      TARGET_REACHED: float(time_to_accuracy is not None)})
    if time_to_accuracy is not None:
        final[TIME_TO_ACCURACY] = time_to_accuracy
    channel.metrics(final)
    return TrainingFigures(test_accuracy, train_s, test_s, time_to_accuracy, epoch, steps)


def _achieved(cost: ComputeCost, train_samples: int, train_s: float, test_samples: int,
              test_s: float) -> dict[str, float]:
    """GFLOP/s achieved in the train and test phases."""
    figures = {}
    if train_s:
        figures[TRAIN_GFLOPS] = cost.training_flops * train_samples / train_s / 1e9
    if test_s:
        figures[TEST_GFLOPS] = cost.forward_flops * test_samples / test_s / 1e9
    return figures


def _accuracy(trainer: Trainer, dataset: Dataset, batch_size: int) -> float:
    """Test-set accuracy, predicted in batches of the training batch size (at least
    :data:`MIN_EVAL_BATCH`): larger evaluation batches leave buffers with the allocator that
    the next epoch's training phase would be measured holding (25 MiB for LeNet-5 at 500)."""
    logits = trainer.predict(dataset.x_test, max(batch_size, MIN_EVAL_BATCH))
    return float((logits.argmax(1) == dataset.y_test).mean())


def _save(channel: WorkerChannel, trainer: Trainer, config: TrainConfig,
          dataset: Dataset) -> None:
    """The model, its ONNX export where the framework can, and reference outputs.

    The reference (inputs and this framework's outputs on them) lets any inference runtime
    check itself against the source framework later.
    """
    example = dataset.x_test[:8]
    tags = {}
    if config.log_model:
        model_dir = worker_dir() / "model"
        tags[MODEL_FLAVOR_TAG] = trainer.save_model(model_dir, example)
        channel.artifacts(model_dir, "model")
    out = worker_dir()
    log_reference(out, example, trainer.predict(example, len(example)))
    try:
        trainer.export_onnx(out / "model.onnx", example)
        tags[ONNX_TAG] = f"{ONNX_DIR}/model.onnx"
    except NotImplementedError as e:
        tags[ONNX_TAG] = f"not exported: {e}"[:500]
    channel.artifacts(out, ONNX_DIR)
    channel.tags(tags)


def main() -> int:
    """Train per the entry's configuration; report figures, or the error, to the entry."""
    return serve("train", lambda params, channel: asdict(
        train(TrainConfig.from_params(params), channel)))


if __name__ == "__main__":
    exit_without_teardown(main())
