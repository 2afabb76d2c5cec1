"""The report's parallel-libraries table: each setting against the framework's default."""

from __future__ import annotations

import uuid

import pandas as pd

from mlflow_dlaas.report.derived import PEAK_MEMORY
from mlflow_dlaas.report.libraries import libraries_table


def _runs(system: str, allocator: str, times: list[float], memory_mb: float) -> list[dict]:
    return [{"run_id": uuid.uuid4().hex, "system": system, "params.allocator": allocator,
             "params.onednn": "default",
             "metrics.Headline/train_time_seconds": t, f"metrics.{PEAK_MEMORY}": memory_mb}
            for t in times]


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
    assert jemalloc["default runs"] == "4"
    assert jemalloc["train time vs default"] == "0.78x"
    assert jemalloc["train time (s)"].startswith("8.05 [")
    assert jemalloc["train time verdict"].startswith("helped (p = 0.029")
    assert jemalloc["peak memory verdict"] == "no measurable difference (p = 1.00)"
    assert rows[("pytorch", "tcmalloc")]["train time verdict"].startswith(
        "no measurable difference")
    tf = rows[("tensorflow", "jemalloc")]
    assert tf["peak memory vs default"] == "1.17x"
    assert tf["train time verdict"].startswith("too few runs (2 vs 2")
    stats = table.stats.set_index(["system", "value"])
    assert len(stats.loc[("pytorch", "jemalloc"), "run_ids"]) == 4  # the contract's run ids
    assert set(train.loc[train["params.allocator"] == "jemalloc", "run_id"]) == {
        *stats.loc[("pytorch", "jemalloc"), "run_ids"], *stats.loc[("tensorflow", "jemalloc"),
                                                                  "run_ids"]}


def test_no_table_when_no_run_changed_a_library_setting() -> None:
    assert libraries_table(pd.DataFrame(_runs("pytorch", "default", [1.0], 1))) is None
    assert libraries_table(pd.DataFrame({"system": ["pytorch"]})) is None
