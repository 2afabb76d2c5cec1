"""The accuracy-against-time plot never draws one Pareto front over two tasks."""

from __future__ import annotations

import pandas as pd

from mlflow_dlaas.report.training_plots import accuracy_vs_time


def test_runs_of_two_epoch_counts_get_a_front_each() -> None:
    """The demo's framework runs (2 epochs) and its study's (1 epoch): a 1-epoch run is
    faster and less accurate by design, so one front over both would mislead."""
    rows = pd.DataFrame({
        "run_id": list("abcd"), "entry": "train", "host": "h",
        "system": ["pytorch", "tensorflow", "pytorch", "pytorch"], "params.model": "lenet5",
        "params.epochs": ["2", "2", "1", "1"],
        "metrics.Headline/test_accuracy": [0.90, 0.91, 0.80, 0.82],
        "metrics.Headline/train_time_seconds": [3.0, 4.0, 1.5, 1.2]})
    plot = accuracy_vs_time(rows)
    assert plot.caption == ("4 runs; 3 on the Pareto front; a front per workload (2: runs of "
                            "different tasks are never on one front).")
    assert accuracy_vs_time(rows[rows["params.epochs"] == "2"]).caption == \
        "2 runs; 2 on the Pareto front."
