"""What a run says about itself in the MLflow UI: a name that tells what it measured
(``pytorch-lenet5-bs64-t2``) and a Markdown description (``mlflow.note.content``) with the
key settings and figures."""

from __future__ import annotations

import re
from collections.abc import Mapping

import mlflow

from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.runs.schema import (
    LATENCY_P50,
    LATENCY_P99,
    LOAD_TIME,
    TEST_TIME,
    THROUGHPUT,
    TRIAL_NAME_TAG,
    VALIDITY_REASON_TAG,
    VALIDITY_TAG,
)
from mlflow_dlaas.workloads.headline import headline_text

NOTE_TAG = "mlflow.note.content"
#: The names MLflow makes up for an unnamed run (``tasteful-ray-891``): such names we replace.
#: MLflow's made-up run names: predicate-noun-N with N from 0 to 1000 inclusive
#: (``random.randint(0, 10**3)``), so up to four digits.
_GENERATED = re.compile(r"[a-z]+-[a-z]+-\d{1,4}")


def threads_label(parallelism: ParallelismSettings) -> str:
    """``-t2`` for 2 intra-op (else OpenMP) threads; '' when the framework chooses."""
    threads = parallelism.intra_op_threads or parallelism.omp_threads
    return f"-t{threads}" if threads else ""


def variant_label(*, device: str = "cpu", jit_compile: bool = False,
                  torch_compile: bool = False, channels_last: bool = False,
                  hybridize: bool = True, precision: str = "fp32", instances: int = 1) -> str:
    """``-cuda-xla-fp16-x2``: the settings that change a run's figures beyond its threads, so
    that two runs that differ by one of them do not share a name."""
    parts = [device] if device != "cpu" else []
    parts += [label for on, label in ((jit_compile, "xla"), (torch_compile, "compile"),
                                      (channels_last, "nhwc"), (not hybridize, "imperative"))
              if on]
    if precision != "fp32":
        parts.append(precision)
    if instances > 1:
        parts.append(f"x{instances}")
    return "".join(f"-{part}" for part in parts)


def training_run_name(framework: str, model: str, batch_size: int,
                      parallelism: ParallelismSettings, variant: str = "") -> str:
    """``pytorch-lenet5-bs64-t2`` (``variant``: :func:`variant_label`'s suffix)."""
    return f"{framework}-{model}-bs{batch_size}{threads_label(parallelism)}{variant}"


def inference_run_name(runtime: str, model: str, batch_sizes: tuple[int, ...],
                       parallelism: ParallelismSettings, variant: str = "") -> str:
    """``onnxruntime-lenet5-bs1,8,32-t1`` (``variant``: :func:`variant_label`'s suffix)."""
    sizes = ",".join(str(b) for b in batch_sizes)
    return f"{runtime}-{model}-bs{sizes}{threads_label(parallelism)}{variant}"


def name_active_run(name: str) -> None:
    """Name the active run ``name`` unless a person or a study named it already."""
    run = mlflow.active_run()
    if run is None:
        return
    current = mlflow.MlflowClient().get_run(run.info.run_id)
    if TRIAL_NAME_TAG in current.data.tags:
        return
    if not current.info.run_name or _GENERATED.fullmatch(current.info.run_name):
        mlflow.set_tag("mlflow.runName", name)


#: Figures of the run's phases that its description shows after the headline ones.
DETAILS = ((TEST_TIME, "test time", "{:.3f} s"), (LOAD_TIME, "model load time", "{:.3f} s"))
_BATCHED_FORMAT = {LATENCY_P50: "p50 {:.3f} ms", LATENCY_P99: "p99 {:.3f} ms",
                   THROUGHPUT: "{:.0f} samples/s"}
_BATCHED = re.compile(r"(?P<scenario>[a-z_]+)/batch_(?P<batch>\d+)/(?P<name>"
                      + "|".join(_BATCHED_FORMAT) + ")")


def headline_figures(metrics: Mapping[str, float]) -> dict[str, str]:
    """The figures a person compares, formatted, from a run's metrics."""
    figures = headline_text(metrics)
    figures.update({label: fmt.format(metrics[key]) for key, label, fmt in DETAILS
                    if key in metrics})
    batched: dict[str, list[str]] = {}
    for key in sorted(metrics, key=_batch_order):
        found = _BATCHED.fullmatch(key)
        if found:
            label = f"{found['scenario']}, batch {found['batch']}"
            batched.setdefault(label, []).append(
                _BATCHED_FORMAT[found["name"]].format(metrics[key]))
    figures.update({label: ", ".join(values) for label, values in batched.items()})
    return figures


def _batch_order(key: str) -> tuple[str, int, str]:
    found = _BATCHED.fullmatch(key)
    return (found["scenario"], int(found["batch"]), found["name"]) if found else (key, 0, "")


def note(title: str, settings: Mapping[str, object], figures: Mapping[str, str],
         validity: str, headline: Mapping[str, str] | None = None) -> str:
    """The run's description, the answer first: the ``headline`` figures with their units
    and the measurement's validity in its first lines (what the MLflow UI shows before "Show
    more"), then the title, the figures and the settings as Markdown tables."""
    answer = " · ".join(f"{label} **{value}**" for label, value in (headline or {}).items())
    lines = [answer or "no headline figure", "", f"Measurement: **{validity}**.", "",
             f"### {title}", "", "| figure | value |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in figures.items()]
    lines += ["", "| setting | value |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in settings.items() if v not in (None, "", ())]
    lines += ["", "Every other statistic is in the `summary.json` artifact; the resource "
                  "timeline in `monitor/timeline.png`."]
    return "\n".join(lines)


def describe_active_run(title: str, settings: Mapping[str, object]) -> None:
    """Set the active run's description from its settings and its logged figures."""
    run = mlflow.MlflowClient().get_run(mlflow.active_run().info.run_id)
    validity = run.data.tags.get(VALIDITY_TAG, "not judged")
    reason = run.data.tags.get(VALIDITY_REASON_TAG, "")
    mlflow.set_tag(NOTE_TAG, note(title, settings, headline_figures(run.data.metrics),
                                  f"{validity}" + (f" ({reason})" if reason else ""),
                                  headline_text(run.data.metrics)))
