"""A run MLflow named at random is renamed after what it measured; a person's name is kept."""

from __future__ import annotations

import mlflow
import pytest

from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.workloads.run_description import (
    inference_run_name,
    name_active_run,
    note,
    training_run_name,
    variant_label,
)


@pytest.mark.parametrize("made_up", ["ambitious-snipe-0", "ambitious-snipe-42",
                                     "ambitious-snipe-1000"])  # randint(0, 10**3): 1000 too
def test_a_name_mlflow_made_up_is_replaced(tracking: str, made_up: str) -> None:
    with mlflow.start_run(run_name=made_up) as run:
        name_active_run("pytorch-lenet5-bs64")
    assert mlflow.get_run(run.info.run_id).info.run_name == "pytorch-lenet5-bs64"


def test_a_persons_name_is_kept(tracking: str) -> None:
    with mlflow.start_run(run_name="baseline for the paper") as run:
        name_active_run("pytorch-lenet5-bs64")
    assert mlflow.get_run(run.info.run_id).info.run_name == "baseline for the paper"


def test_a_run_name_carries_what_changes_the_figures() -> None:
    """Runs that differ by compilation, memory format, precision or copies do not share a name."""
    threads = ParallelismSettings(intra_op_threads=2)
    assert training_run_name("tensorflow", "lenet5", 64, threads,
                             variant_label(jit_compile=True)) == "tensorflow-lenet5-bs64-t2-xla"
    assert inference_run_name("pytorch", "resnet18", (1, 8), threads, variant_label(
        torch_compile=True, precision="fp16", instances=2)) == \
        "pytorch-resnet18-bs1,8-t2-compile-fp16-x2"
    assert variant_label(device="cuda", hybridize=False) == "-cuda-imperative"
    assert variant_label() == ""


def test_the_description_starts_with_the_answer() -> None:
    """What the MLflow UI shows before "Show more": the headline figures with their units
    and whether the measurement is valid, before any setting."""
    text = note("Inference: lenet5 on onnxruntime", {"runtime": "onnxruntime"},
                {"single_stream, batch 1": "p50 0.2 ms"}, "valid",
                {"single-stream p50": "0.21 ms", "offline throughput": "8300 samples/s"})
    first, _, third = text.splitlines()[:3]
    assert first == ("single-stream p50 **0.21 ms** · offline throughput **8300 samples/s**")
    assert third == "Measurement: **valid**."
    assert text.index("| figure |") < text.index("| setting |")
