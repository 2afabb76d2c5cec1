"""The contract every inference runtime keeps, built-in or plug-in.

A plug-in's own test::

    from mlflow_dlaas.testing.runtime_contract import check_runtime

    def test_my_runtime_keeps_the_contract(tmp_path):
        check_runtime(MyRuntime, tmp_path)

Each check takes a fresh runtime and a scratch folder; the model is LeNet-5 with random
weights (no download), in the form the runtime takes it: its ONNX export, or what the
runtime's own ``fresh_source`` builds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from mlflow_dlaas.backends.formats import serves_onnx
from mlflow_dlaas.backends.served_model import ModelSource
from mlflow_dlaas.backends.serving import InferenceOptions, InferenceRuntime
from mlflow_dlaas.inference import equivalence
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.sources.fresh import export_fresh, fresh_source
from mlflow_dlaas.inference.sources.load import prepared_source
from mlflow_dlaas.parallelism import ParallelismSettings

MODEL = "lenet5"
#: The fp32 tolerance every run's output check uses.
RTOL, ATOL = InferConfig.rtol, InferConfig.atol


def contract_source(runtime: InferenceRuntime, workdir: Path) -> ModelSource:
    """LeNet-5, random weights, as ``runtime`` (loaded) takes it, by the road a run's fresh
    model takes: exported to ONNX beforehand, or built by the runtime itself."""
    if serves_onnx(runtime):
        export_fresh(MODEL, "", 0, workdir)
        return prepared_source(workdir)
    return fresh_source(runtime, MODEL, "", 0)


def _prepared(runtime: InferenceRuntime, workdir: Path
              ) -> tuple[ModelSource, Callable[[np.ndarray], np.ndarray]]:
    runtime.load()
    source = contract_source(runtime, workdir)
    runtime.apply_threads(ParallelismSettings())  # as the harness does, before prepare()
    return source, runtime.prepare(source, InferenceOptions())


def check_declares_itself(runtime: InferenceRuntime, workdir: Path) -> None:
    """Its name, the module it imports, the extra that installs it, what it consumes."""
    for attribute in ("name", "module", "extra", "consumes"):
        value = getattr(type(runtime), attribute, None)
        assert isinstance(value, str) and value, f"{type(runtime).__name__}.{attribute}"


def check_loads_and_says_its_version(runtime: InferenceRuntime, workdir: Path) -> None:
    runtime.load()
    assert isinstance(runtime.version(), str) and runtime.version()


def check_environment_is_variables(runtime: InferenceRuntime, workdir: Path) -> None:
    """What it needs set before it loads, for default settings: string variables."""
    variables = runtime.environment(ParallelismSettings())
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in variables.items())


def check_reproduces_the_reference(runtime: InferenceRuntime, workdir: Path) -> None:
    """Its outputs match the reference framework's within the fp32 rule of every run."""
    source, predict = _prepared(runtime, workdir)
    reference = (source.reference_outputs if source.reference_outputs.size
                 else runtime.reference())
    assert reference is not None, "a natively built source needs reference() after prepare()"
    outputs = predict(runtime.layout(source.reference_inputs))
    result = equivalence.compare(outputs, reference, precision="fp32", rtol=RTOL, atol=ATOL)
    assert result.passed, f"max abs error {result.max_abs_error:.3g} ({result.rule})"


def check_serves_any_batch_size(runtime: InferenceRuntime, workdir: Path) -> None:
    """One row of finite logits per sample, for batches of 1, 3 and 8."""
    source, predict = _prepared(runtime, workdir)
    inputs = runtime.layout(source.reference_inputs)
    for n in (1, 3, 8):
        out = predict(inputs[:n])
        assert out.shape == (n, source.num_classes) and np.isfinite(out).all(), n


def check_reports_threads_and_libraries(runtime: InferenceRuntime, workdir: Path) -> None:
    """After prepare(): the thread settings in force, and its parallel libraries."""
    _prepared(runtime, workdir)
    assert runtime.threads_in_force(), "threads_in_force() reports nothing"
    assert isinstance(runtime.libraries_in_force(), dict)


CONTRACT: tuple[Callable[[InferenceRuntime, Path], None], ...] = (
    check_declares_itself,
    check_loads_and_says_its_version,
    check_environment_is_variables,
    check_reproduces_the_reference,
    check_serves_any_batch_size,
    check_reports_threads_and_libraries,
)


def check_runtime(runtime_class: type[InferenceRuntime], workdir: Path) -> None:
    """Every check of the contract, each on a fresh runtime in its own folder."""
    for check in CONTRACT:
        folder = workdir / check.__name__
        folder.mkdir(parents=True, exist_ok=True)
        check(runtime_class(), folder)
