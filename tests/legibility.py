"""What a person sees of a run in the MLflow UI: a short metric list, system charts, a
legible overview (shared by the real training and inference run tests)."""

from __future__ import annotations

import mlflow

from mlflow_dlaas.runs.schema import ENV_TAG_PREFIX as TAG_PREFIX

#: At most this many metric keys on a run, so that the headline figures can be found. An
#: exported runtime's inference run of four scenarios at two batch sizes logs 86 (its compute
#: figures included: FLOPs per sample, the bytes a sample moves and the weights', GFLOP/s, the
#: measured ceiling, the nominal peak, the bandwidth and the fraction), and up to 4 more
#: that only some runs log: LoadGen's early-stopping p99 per batch size (where its estimate
#: is reported) and the load phase's peak RSS (where the monitor sampled within it): 90 at
#: most, as measured on a 2-core AMX Xeon whose load phase the monitor samples; and the
#: monitor's own cost on every run (its CPU seconds and its samples): 92.
TRAINING_METRIC_BUDGET = 60
INFERENCE_METRIC_BUDGET = 92
#: The fingerprint's tags (the CPU, the versions); and every tag of ours on a run: MLflow's
#: run page lists them all above the description in a window under 992 px wide (19 with
#: the model source's kind, ``dlaas.model_source``, on an inference run).
MAX_FINGERPRINT_TAGS = 4
MAX_DLAAS_TAGS = 19


def assert_legible_in_the_ui(run: mlflow.entities.Run, *, max_metrics: int,
                             client: mlflow.MlflowClient | None = None) -> None:
    """The metric budget, the System metrics tab's series, few fingerprint tags, and every
    other figure in artifacts (read through ``client``, the current store's by default)."""
    client = client or mlflow.MlflowClient()
    metrics = run.data.metrics
    assert len(metrics) <= max_metrics, f"{len(metrics)} metric keys: {sorted(metrics)}"
    for series in ("system/cpu_utilization_percentage", "system/process_tree_rss_megabytes",
                   "system/process_tree_cpu_percentage"):
        assert series in metrics, series
    assert not [k for k in metrics if k.startswith("monitor/")]
    history = client.get_metric_history(run.info.run_id,
                                                       "system/process_tree_rss_megabytes")
    megabytes = [m.value for m in sorted(history, key=lambda m: m.step)]
    assert len(megabytes) >= 3 and all(1 < mb < 100_000 for mb in megabytes), megabytes  # MB
    fingerprint = [t for t in run.data.tags if t.startswith(TAG_PREFIX)]
    assert len(fingerprint) <= MAX_FINGERPRINT_TAGS, fingerprint
    ours = [t for t in run.data.tags if t.startswith("dlaas.")]
    assert len(ours) <= MAX_DLAAS_TAGS, sorted(ours)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"summary.json", "environment", "monitor"} <= artifacts, artifacts
    assert "environment/fingerprint.json" in {
        a.path for a in client.list_artifacts(run.info.run_id, "environment")}
