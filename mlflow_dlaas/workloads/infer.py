"""The inference entry point: one runtime, a batch-size sweep, MLPerf-style scenarios, one run.

Run as ``python -m mlflow_dlaas.workloads.infer --runtime onnxruntime --batch_sizes 1,8``
(what every project's ``infer`` entry point does). This process validates the params, owns
the MLflow run and the monitor, and fetches a training run's model; the measured work runs
in :mod:`~mlflow_dlaas.workloads.infer_worker`, started with the parallel settings in force.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mlflow
from mlflow.exceptions import MlflowException

from mlflow_dlaas.backends import get_runtime
from mlflow_dlaas.config import as_cli_params
from mlflow_dlaas.errors import ConfigError, WorkloadError
from mlflow_dlaas.figures import significant
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.model_uri import parse_model_uri
from mlflow_dlaas.inference.run_artifacts import (
    fetch_run_model,
    is_training_run,
    prepare_text_model,
    prepare_user_model,
)
from mlflow_dlaas.inference.source import SOURCE_ENV
from mlflow_dlaas.inference.text_model import TEXT_MODELS
from mlflow_dlaas.measured_process.lifeline import exit_without_teardown
from mlflow_dlaas.measured_process.scratch import scratch_dir
from mlflow_dlaas.measured_process.start import WorkerLaunch
from mlflow_dlaas.measured_process.supervisor import run_worker
from mlflow_dlaas.parallelism import worker_environment
from mlflow_dlaas.runs.lifecycle import failing_run_guard, log_new_params
from mlflow_dlaas.runs.schema import (
    ENTRY_TAG,
    LATENCY_P99,
    RUNTIME_TAG,
    SERVER_MAX_QPS,
    headline_text,
    inference_headline,
    scenario_key,
)
from mlflow_dlaas.runs.tracking import configure_tracking
from mlflow_dlaas.runs.validity import disturbed_warning
from mlflow_dlaas.workloads.entry import run_entry_point
from mlflow_dlaas.workloads.run_description import (
    describe_active_run,
    inference_run_name,
    name_active_run,
    variant_label,
)

WORKER = "mlflow_dlaas.workloads.infer_worker"
#: A server run at one given rate (no search): its p99, printed with the headline figures.
SERVER_P99 = scenario_key("server", LATENCY_P99)


@dataclass(frozen=True)
class InferenceResult:
    """The run and the figures it logged (metric -> value)."""

    run_id: str
    runtime: str
    figures: dict[str, float]
    #: ``disturbed: ...; not comparable`` where other work shared the CPU, else ''
    warning: str = ""

    def summary(self) -> str:
        """One line for the console: the headline figures the run measured, after the
        warning that they are not comparable where the run was disturbed."""
        figures = {**inference_headline(self.figures), **self.figures}
        shown = [f"{label} {value}" for label, value in headline_text(figures).items()]
        if SERVER_P99 in self.figures and SERVER_MAX_QPS not in self.figures:
            shown.append(f"server p99 {significant(self.figures[SERVER_P99])} ms")
        first = f"{self.warning}: " if self.warning else ""
        return (f"run {self.run_id}: {self.runtime}: {first}"
                f"{', '.join(shown) or 'no headline figure'}")


def run_inference(config: InferConfig) -> InferenceResult:
    """Benchmark per ``config`` in the active (or a new) run; the run always ends."""
    runtime = get_runtime(config.runtime)
    configure_tracking(announce=False)
    with failing_run_guard() as run, scratch_dir("source") as source_dir:
        run_id = run.info.run_id
        name_active_run(inference_run_name(
            config.runtime, _served_model(config), config.batch_sizes, config.parallelism,
            variant_label(device=config.device, jit_compile=config.jit_compile,
                          torch_compile=config.torch_compile,
                          precision=config.precision, instances=config.instances)))
        params = config.as_params()
        log_new_params(run_id, params)
        mlflow.set_tags({ENTRY_TAG: "infer", RUNTIME_TAG: runtime.name})
        environment = worker_environment(config.parallelism,
                                         runtime.environment(config.parallelism))
        if config.model_uri or runtime.consumes == "onnx" or config.model in TEXT_MODELS:
            _prepare_source(config, runtime.consumes, Path(source_dir))
            environment[SOURCE_ENV] = source_dir
        launch = WorkerLaunch(
            module=WORKER, argv=as_cli_params(params), environment=environment,
            cpu_affinity=config.parallelism.cpu_affinity, measured_phases=config.scenarios,
            headline_phases=config.scenarios, monitor_interval_s=config.monitor_interval,
            stall_timeout_s=config.stall_timeout_s, thresholds=config.validity)
        run_worker(launch, run_id)
        mlflow.log_metrics(inference_headline(
            mlflow.MlflowClient().get_run(run_id).data.metrics))
        describe_active_run(f"Inference: {config.model} on {config.runtime}",
                            _key_settings(config))
    finished = mlflow.MlflowClient().get_run(run_id)
    return InferenceResult(run_id, config.runtime, dict(finished.data.metrics),
                           disturbed_warning(finished.data.tags))


def _served_model(config: InferConfig) -> str:
    """The model's name for the run's name: a training run's own ``model`` param where
    ``model_uri`` is that run (``mlp`` rather than ``run-1a2b3c4d``)."""
    uri = parse_model_uri(config.model_uri)
    if uri.kind != "run" or uri.run_path or not config.model.startswith("run-"):
        return config.model
    try:
        trained = mlflow.MlflowClient().get_run(uri.run_id).data.params.get("model")
    except MlflowException:  # fetching the model says what is wrong with the URI
        return config.model
    return trained or config.model


def _key_settings(config: InferConfig) -> dict[str, object]:
    """The settings a person compares runs by (all are in the run's params)."""
    threads = config.parallelism
    return {"runtime": config.runtime, "model": config.model_uri or config.model,
            "batch sizes": ",".join(map(str, config.batch_sizes)),
            "scenarios": ", ".join(config.scenarios), "precision": config.precision,
            "intra-op threads": threads.intra_op_threads or "runtime default",
            "CPU affinity": ",".join(map(str, threads.cpu_affinity or ())) or "all cores"}


def _prepare_source(config: InferConfig, consumes: str, directory: Path) -> None:
    """Fetch the training run's model, or export a fresh one to ONNX in its own process
    (so that no PyTorch is loaded where ONNX Runtime or OpenVINO is measured)."""
    if not config.model_uri and config.model in TEXT_MODELS:
        prepare_text_model(config, config.runtime, consumes, directory)
        return
    if config.model_uri and not is_training_run(config.model_uri):  # the user's own model
        prepare_user_model(config, config.runtime, consumes, directory)
        return
    if config.model_uri:
        fetch_run_model(config.model_uri, directory, with_model=consumes != "onnx")
        return
    command = [sys.executable, "-m", "mlflow_dlaas.inference.fresh_export", "--model",
               config.model, "--seed", str(config.seed), "--out", str(directory)]
    if config.input_shape:
        command += ["--input_shape", config.input_shape]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode == ConfigError.exit_code:
        raise ConfigError(done.stderr.strip())
    if done.returncode != 0:
        raise WorkloadError(f"exporting {config.model} to ONNX failed: "
                            f"{done.stderr.strip()[-2000:]}")


def _infer(params: Mapping[str, str]) -> InferenceResult:
    return run_inference(InferConfig.from_params(params))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of every project's ``infer``."""
    return run_entry_point("infer", argv, _infer, InferenceResult.summary)


if __name__ == "__main__":
    exit_without_teardown(main())
