"""The report's parallel-libraries table: each setting against the framework's default,
like for like."""

from __future__ import annotations

import itertools
import uuid

import pandas as pd

from mlflow_dlaas.report.comparable import configuration_columns
from mlflow_dlaas.report.derived import PEAK_MEMORY
from mlflow_dlaas.report.libraries import libraries_table

TIME = "metrics.Headline/train_time_seconds"


def _runs(system: str, allocator: str, times: list[float], memory_mb: float,
          **params: object) -> list[dict]:
    return [{"run_id": uuid.uuid4().hex, "system": system, "entry": "train",
             "params.allocator": allocator, "params.onednn": "default",
             **{f"params.{k}": str(v) for k, v in params.items()},
             TIME: t, f"metrics.{PEAK_MEMORY}": memory_mb} for t in times]


def test_each_setting_is_judged_against_its_frameworks_default() -> None:
    train = pd.DataFrame(
        _runs("pytorch", "default", [10.0, 10.5, 11.0, 10.2], 400)
        + _runs("pytorch", "jemalloc", [8.0, 8.1, 8.3, 7.9], 400)  # faster every time
        + _runs("pytorch", "tcmalloc", [10.1, 10.9, 10.3, 10.6], 400)  # within the noise
        + _runs("tensorflow", "", [20.0, 21.0], 600)  # '' is the default too
        + _runs("tensorflow", "jemalloc", [30.0, 31.0], 700))
    table = libraries_table(train)
    assert table is not None
    rows = {(r[0], r[2]): dict(zip(table.headings, r, strict=True)) for r in table.cells}
    assert set(rows) == {("pytorch", "jemalloc"), ("pytorch", "tcmalloc"),
                         ("tensorflow", "jemalloc")}  # onednn never left its default
    jemalloc = rows[("pytorch", "jemalloc")]
    assert jemalloc["runs vs default runs"] == "4 vs 4"
    assert jemalloc["train time (s)"].startswith("8.05 [")
    assert jemalloc["train time vs default"].startswith("better by 23 % (ratio 0.775, 95 % CI")
    assert jemalloc["peak memory vs default"].startswith("no meaningful difference (ratio 1.00")
    assert rows[("pytorch", "tcmalloc")]["train time vs default"].startswith("not separable")
    tf = rows[("tensorflow", "jemalloc")]
    assert tf["train time vs default"].startswith("too few runs (2 vs 2")
    stats = table.stats.set_index(["system", "value"])
    assert stats.loc[("pytorch", "jemalloc"), "Headline/train_time_seconds|ci_high"] < 1
    assert len(stats.loc[("pytorch", "jemalloc"), "run_ids"]) == 4  # the contract's run ids
    assert set(train.loc[train["params.allocator"] == "jemalloc", "run_id"]) == {
        *stats.loc[("pytorch", "jemalloc"), "run_ids"], *stats.loc[("tensorflow", "jemalloc"),
                                                                  "run_ids"]}
    assert "," in table.stats_csv().loc[0, "default_run_ids"]  # both sides, readable in CSV


def test_every_row_compares_like_with_like_among_confounders() -> None:
    """Another learning rate, epoch count and model beside a grid of two settings: each
    row's two sides differ in the setting under test and nothing else."""
    runs: list[dict] = []
    for threads, allocator, openmp in itertools.product(["1", "2"], ["default", "jemalloc"],
                                                        ["default", "intel"]):
        base = 10.0 if threads == "1" else 6.0
        time = base * (0.8 if openmp == "intel" else 1.0)
        runs += _runs("pytorch", allocator, [time, time * 1.01], 400, epochs=1,
                      intra_op_threads=threads, openmp_runtime=openmp, learning_rate=0.01,
                      model="lenet5")
    runs += _runs("pytorch", "default", [20.0] * 4, 400, epochs=2, intra_op_threads=2,
                  openmp_runtime="default", learning_rate=0.01, model="lenet5")
    runs += _runs("pytorch", "default", [9.0] * 3, 400, epochs=1, intra_op_threads=2,
                  openmp_runtime="default", learning_rate=0.1, model="lenet5")
    runs += _runs("pytorch", "default", [90.0] * 3, 900, epochs=1, intra_op_threads=2,
                  openmp_runtime="default", learning_rate=0.01, model="resnet18")
    runs += _runs("pytorch", "jemalloc", [91.0] * 3, 900, epochs=1, intra_op_threads=1,
                  openmp_runtime="default", learning_rate=0.01, model="resnet18")
    train = pd.DataFrame(runs)
    table = libraries_table(train)
    assert table is not None
    by_id = train.set_index("run_id")
    config = [c for c in configuration_columns(train)]
    for _, row in table.stats.iterrows():
        setting = f"params.{row['setting']}"
        others = [c for c in config if c != setting]
        if not row["run_ids"]:
            assert row["cells"] == 0 and row["unmatched_run_ids"]
            continue
        chosen = by_id.loc[row["run_ids"], others].drop_duplicates()
        baseline = by_id.loc[row["default_run_ids"], others].drop_duplicates()
        assert chosen.sort_values(others).to_numpy().tolist() == \
            baseline.sort_values(others).to_numpy().tolist(), row["setting"]
        assert set(by_id.loc[row["default_run_ids"], setting]) <= {"default", ""}
    intel = table.stats[(table.stats["value"] == "intel")].iloc[0]
    assert intel["cells"] == 4 and intel["runs"] == 8 and intel["default runs"] == 8
    assert set(intel["pooled_over"].split("; ")) == {"allocator", "intra_op_threads"}
    assert intel["workload"] == "train · lenet5 · 1 epoch"  # the 2-epoch runs: another workload
    assert intel["held"] == "learning_rate=0.01"  # the 0.1 runs have no intel counterpart
    assert intel["Headline/train_time_seconds|verdict"] == "better"
    assert 0.79 < intel["Headline/train_time_seconds|ratio"] < 0.81
    # ResNet-18's lone jemalloc runs have no default at one thread: no counterpart, not pooled
    lone = table.stats[table.stats["workload"].str.contains("resnet18")]
    assert list(lone["cells"]) == [0] and len(lone.iloc[0]["unmatched_run_ids"]) == 3


def test_no_table_when_no_run_changed_a_library_setting() -> None:
    assert libraries_table(pd.DataFrame(_runs("pytorch", "default", [1.0], 1))) is None
    assert libraries_table(pd.DataFrame({"system": ["pytorch"]})) is None
