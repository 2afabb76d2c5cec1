"""Runs screened by their validity verdict, grouped by host, and their peak memory."""

from __future__ import annotations

import pandas as pd
import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.report.derived import add_peak_memory, tree_peak_fallbacks
from mlflow_dlaas.report.hosts import hosts, pick_host
from mlflow_dlaas.report.screening import screen

REASONS = ["other processes used 0.91 of 2 cores during train (limit 0.25)",
           "other processes used 1.20 of 2 cores during train (limit 0.25); the hypervisor "
           "stole 7.5 % of the CPU during train", None]


def _runs() -> pd.DataFrame:
    return pd.DataFrame({
        "run_id": list("abcdef"), "entry": "train", "system": "pytorch",
        "validity": ["disturbed", "disturbed", "disturbed", "valid", None, "valid"],
        "validity_reason": [*REASONS, "quiet", None, "quiet"],
        "host": ["h1", "h1", "h2", "h1", "h2", "h2"],
        "cpu_model": ["CPU one", "CPU one", "CPU two", "CPU one", "", "CPU two"],
    })


def test_disturbed_runs_are_left_out_and_their_reasons_grouped() -> None:
    screened = screen(_runs(), include_disturbed=False)
    assert list(screened.kept["run_id"]) == ["d", "e", "f"]
    assert (screened.disturbed, screened.unverified) == (3, 1)
    left_out, unverified = screened.notes()
    # each kind in full words, with its figures' range and how many of the 3 runs it hit
    assert left_out.startswith("Left out: 3 disturbed runs (in 2 of 3: other processes used "
                               "0.91–1.20 of 2 cores (limit 0.25) during train; in 1 of 3: the "
                               "hypervisor stole 7.50 % of the CPU during train; in 1 of 3: no "
                               "reason recorded)"), left_out
    assert "…" not in left_out
    assert left_out.endswith("Add --include-disturbed to keep them.")
    assert unverified.startswith("No validity verdict on 1 run (logged before")
    assert unverified.endswith("they do not count toward a winner.")


def test_included_disturbed_runs_are_kept_and_said_to_count() -> None:
    screened = screen(_runs(), include_disturbed=True)
    assert len(screened.kept) == 6 and screened.disturbed == 3
    assert screened.notes()[0].startswith("Kept with --include-disturbed: 3 "
                                          "disturbed runs")


def test_hosts_are_ranked_by_valid_runs_and_picked() -> None:
    runs = _runs()
    found = hosts(runs)
    assert [(h.name, h.cpu_model, h.valid, len(h.runs)) for h in found] == [
        ("h1", "CPU one", 1, 3), ("h2", "CPU two", 1, 3)]  # a tie: the name decides
    kept = screen(runs, include_disturbed=False).kept  # h1: 1 valid, h2: 1 valid + 1 unverified
    chosen, (note,) = pick_host(kept, None)
    assert chosen.name == "h2"
    assert note.startswith("Judged on host h2 (CPU two), the host with the most valid runs (1)")
    assert pick_host(kept, "h1")[0].name == "h1"
    with pytest.raises(ConfigError, match="no finished runs on host 'h3'; hosts here: h2"):
        pick_host(kept, "h3")
    assert pick_host(kept[kept["host"] == "h1"], None)[1] == []  # one host: nothing to say


def test_peak_memory_is_the_frameworks_own_else_the_process_trees() -> None:
    runs = pd.DataFrame({"metrics.Headline/peak_memory_megabytes": [100.0, None, None],
                         "metrics.run/peak_proc_rss_megabytes": [400.0, 300.0, None]})
    filled = add_peak_memory(runs)["metrics.Headline/peak_memory_megabytes"]
    assert filled.tolist()[:2] == [100.0, 300.0] and filled.isna().tolist()[2]
    assert tree_peak_fallbacks(runs) == 1
