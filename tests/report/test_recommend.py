"""Recommendation rules on a table of runs: constraints on medians, ties, the winner's margin."""

from __future__ import annotations

import pandas as pd

from mlflow_dlaas.report.goals import parse_bound, parse_goal
from mlflow_dlaas.report.recommend import recommend


def _runs(times: dict[str, list[float]], memory: dict[str, float]) -> pd.DataFrame:
    rows = []
    for system, values in times.items():
        for seed, value in enumerate(values):
            rows.append({"run_id": f"{system}-{seed}", "run_name": f"{system}-{seed}",
                         "experiment_id": "1", "entry": "train", "system": system,
                         "params.seed": str(seed), "metrics.train_time_seconds": value,
                         "metrics.run/peak_proc_rss_bytes": memory[system]})
    return pd.DataFrame(rows)


def test_a_clear_winner_and_an_overlapping_one() -> None:
    clear = _runs({"pytorch": [1.0, 1.1, 1.2], "tensorflow": [2.0, 2.1, 2.2]},
                  {"pytorch": 1e9, "tensorflow": 1e9})
    answer = recommend(clear, parse_goal("train_time"))
    assert answer.best["system"] == "pytorch"
    assert answer.value.startswith("1.1 (median of 3 runs, IQR 1.05–1.15)")
    assert answer.margin == "clear of the next best (the IQRs do not overlap)"
    close = _runs({"pytorch": [1.0, 1.5, 2.0], "tensorflow": [1.2, 1.6, 2.2]},
                  {"pytorch": 1e9, "tensorflow": 1e9})
    assert recommend(close, parse_goal("train_time")).margin == (
        "its IQR overlaps the next best's: not a clear winner")


def test_constraints_apply_to_medians_and_say_what_they_excluded() -> None:
    runs = _runs({"pytorch": [1.0, 1.1], "tensorflow": [2.0, 2.1]},
                 {"pytorch": 3 * 2**30, "tensorflow": 1 * 2**30})
    answer = recommend(runs, parse_goal("train_time"), (parse_bound("peak_memory<=2GiB"),))
    assert answer.best["system"] == "tensorflow"
    assert answer.margin == "the only qualifying configuration"
    none = recommend(runs, parse_goal("train_time"), (parse_bound("peak_memory<=1MiB"),))
    assert not none.found and none.excluded == {"peak_memory<=1MiB": 2}
    assert "no configuration qualifies (2 considered" in none.sentence()
