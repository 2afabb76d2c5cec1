"""The inference entry point: one runtime, a batch-size sweep, MLPerf-style scenarios, one run.

Run as ``python -m mlflow_dlaas.workloads.infer --runtime onnxruntime --batch_sizes 1,8``
(what every project's ``infer`` entry point does). This process validates the params, owns
the MLflow run and the monitor, and fetches a training run's model; the measured work runs
in :mod:`~mlflow_dlaas.workloads.infer_worker`, started with the parallel settings in force.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mlflow

from mlflow_dlaas.backends import get_runtime
from mlflow_dlaas.backends.formats import model_formats
from mlflow_dlaas.backends.model_files import TRUST_PICKLES_ENV
from mlflow_dlaas.figures import significant
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.sources.manifest import SOURCE_ENV, SourceManifest
from mlflow_dlaas.inference.sources.plan import plan_source
from mlflow_dlaas.inference.sources.prepare import prepare_source
from mlflow_dlaas.measured_process.lifeline import exit_without_teardown
from mlflow_dlaas.measured_process.scratch import scratch_dir
from mlflow_dlaas.measured_process.start import WorkerLaunch
from mlflow_dlaas.measured_process.supervisor import run_worker
from mlflow_dlaas.parallelism import worker_environment
from mlflow_dlaas.runs.schema import (
    ENTRY_TAG,
    LATENCY_P99,
    MODEL_SOURCE_TAG,
    OFFLINE_GFLOPS,
    RUNTIME_TAG,
    SERVER_MAX_QPS,
    TRUSTED_PICKLE_TAG,
    inference_headline,
    scenario_key,
)
from mlflow_dlaas.runs.validity import disturbed_warning
from mlflow_dlaas.store.lifecycle import failing_run_guard, log_new_params
from mlflow_dlaas.store.tracking import configure_tracking
from mlflow_dlaas.workloads.entry import run_entry_point
from mlflow_dlaas.workloads.headline import headline_text
from mlflow_dlaas.workloads.peak import log_fraction_of_peak
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
    runtime = get_runtime(config.runtime)  # the config has asked its declaration
    configure_tracking(announce=False)
    with failing_run_guard() as run, scratch_dir("source") as source_dir:
        run_id = run.info.run_id
        plan = plan_source(config, runtime)
        name_active_run(inference_run_name(
            config.runtime, plan.name, config.batch_sizes, config.parallelism,
            variant_label(device=config.device, jit_compile=config.jit_compile,
                          torch_compile=config.torch_compile,
                          precision=_precision_label(config), instances=config.instances)))
        params = config.as_params()
        log_new_params(run_id, params)
        mlflow.set_tags({ENTRY_TAG: "infer", RUNTIME_TAG: runtime.name,
                         MODEL_SOURCE_TAG: plan.kind})
        environment = worker_environment(config.parallelism,
                                         runtime.environment(config.parallelism))
        if prepare_source(plan, config, runtime, Path(source_dir)):
            environment[SOURCE_ENV] = source_dir
            _tag_a_trusted_pickle(Path(source_dir))
        launch = WorkerLaunch(
            module=WORKER, config=params, environment=environment,
            cpu_affinity=config.parallelism.cpu_affinity, measured_phases=config.scenarios,
            headline_phases=config.scenarios, monitor_interval_s=config.monitor_interval,
            stall_timeout_s=config.stall_timeout_s, thresholds=config.validity)
        run_worker(launch, run_id)
        if config.device == "cpu":
            log_fraction_of_peak(run_id, OFFLINE_GFLOPS, config.precision,
                                 config.parallelism.cpu_affinity)
        mlflow.log_metrics(inference_headline(
            mlflow.MlflowClient().get_run(run_id).data.metrics))
        trained_in = f" (trained in {config.model})" if plan.name != config.model else ""
        describe_active_run(f"Inference: {plan.name}{trained_in} on {config.runtime}",
                            _key_settings(config))
    finished = mlflow.MlflowClient().get_run(run_id)
    return InferenceResult(run_id, config.runtime, dict(finished.data.metrics),
                           disturbed_warning(finished.data.tags))


def _tag_a_trusted_pickle(source_dir: Path) -> None:
    """Say on the run that its model was a pickle loaded on the user's word."""
    user = SourceManifest.read(source_dir).user
    if user is not None and any(f.kind == user.kind and f.unpickles_code
                                for f in model_formats()):
        mlflow.set_tag(TRUSTED_PICKLE_TAG, f"{user.path.name}: a pickled module, loaded "
                                           f"because {TRUST_PICKLES_ENV}=1")


def _precision_label(config: InferConfig) -> str:
    """``int8-static`` where int8 was quantized ahead, else the precision."""
    static = config.precision == "int8" and config.quantization == "static"
    return f"{config.precision}-static" if static else config.precision


def _key_settings(config: InferConfig) -> dict[str, object]:
    """The settings a person compares runs by (all are in the run's params)."""
    threads = config.parallelism
    served = config.model_uri.text if config.model_uri is not None else config.model
    return {"runtime": config.runtime, "model": served,
            "batch sizes": ",".join(map(str, config.batch_sizes)),
            "scenarios": ", ".join(config.scenarios), "precision": _precision_label(config),
            "intra-op threads": threads.intra_op_threads or "runtime default",
            "CPU affinity": ",".join(map(str, threads.cpu_affinity or ())) or "all cores"}


def _infer(params: Mapping[str, str]) -> InferenceResult:
    return run_inference(InferConfig.from_params(params))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of every project's ``infer``."""
    return run_entry_point("infer", argv, _infer, InferenceResult.summary)


if __name__ == "__main__":
    exit_without_teardown(main())
