"""The report's precision tables: each reduced precision against fp32, like for like, with
its speed-up and its accuracy cost."""

from __future__ import annotations

import uuid

import pandas as pd

from mlflow_dlaas.report.precision import inference_precision_table, training_precision_table
from mlflow_dlaas.runs import schema


def _inference(precision: str, quantization: str, batch_size: int, p50_ms: list[float],
               agreement: float, **params: object) -> list[dict]:
    return [{"run_id": uuid.uuid4().hex, "system": "openvino", "entry": "infer",
             "batch_size": batch_size, "params.precision": precision,
             "params.quantization": quantization,
             **{f"params.{k}": str(v) for k, v in params.items()},
             f"metrics.{schema.P50_LATENCY}": t,
             f"metrics.{schema.INFERENCE_THROUGHPUT}": batch_size * 1000 / t,
             f"metrics.{schema.EQUIVALENCE_TOP1_AGREEMENT}": agreement,
             f"metrics.{schema.EQUIVALENCE_MAX_RELATIVE_ERROR}": 1 - agreement}
            for t in p50_ms]


def test_each_precision_is_set_against_fp32_per_batch_size_with_its_accuracy_cost() -> None:
    rows = pd.DataFrame(
        _inference("fp32", "dynamic", 1, [2.0, 2.1, 2.05, 2.02], 1.0)
        + _inference("bf16", "dynamic", 1, [1.0, 1.02, 1.01, 1.03], 0.99)
        + _inference("int8", "static", 1, [1.5, 1.52, 1.51], 0.97)
        + _inference("fp32", "dynamic", 32, [20.0, 20.5, 20.2], 1.0)
        + _inference("bf16", "dynamic", 32, [8.0, 8.1, 8.2], 0.99)
        # other threads and no fp32 beside them: never set against the two-thread fp32
        + _inference("bf16", "dynamic", 1, [0.9, 0.91, 0.92], 0.99, intra_op_threads=1))
    rows["params.intra_op_threads"] = rows["params.intra_op_threads"].fillna("2")
    table = inference_precision_table(rows)
    assert table is not None
    found = {(r[1], r[3], len(r)): dict(zip(table.headings, r, strict=True))
             for r in table.cells}
    by_row = {(k[0], k[1]): v for k, v in found.items()}
    # int8 is named with its quantization: an fp32 run's quantization never blocks the match
    assert set(by_row) == {("1", "bf16"), ("1", "int8-static"), ("32", "bf16")}
    bf16 = by_row[("1", "bf16")]
    assert bf16["runs vs fp32 runs"] == "4 vs 4"  # the one-thread bf16 runs have no fp32
    assert bf16["held fixed"] == "intra_op_threads=2"
    assert bf16["p50 at fp32"] == "2.04 [2.02–2.06]"
    assert bf16["p50 vs fp32"].startswith("better by 50 %")
    assert bf16["throughput vs fp32"].startswith("better by 101 % (ratio 2.01")  # 2x the rate
    assert bf16["top-1 agreement with fp32"] == "0.990 [0.990–0.990]"
    assert by_row[("1", "int8-static")]["output deviation (of max |ref|)"].startswith("0.0300")
    lone = table.stats[table.stats["unmatched_run_ids"].map(len) > 0]
    assert len(lone) == 1 and len(lone.iloc[0]["unmatched_run_ids"]) == 3


def test_no_table_where_every_run_ran_fp32() -> None:
    rows = pd.DataFrame(_inference("fp32", "dynamic", 1, [2.0], 1.0)
                        + _inference("", "", 1, [2.0], 1.0))  # older runs logged none
    assert inference_precision_table(rows) is None
    train = pd.DataFrame([{"run_id": "a", "system": "pytorch", "entry": "train",
                           f"metrics.{schema.TRAIN_TIME}": 1.0}])
    assert training_precision_table(train) is None


def test_a_precision_whose_run_failed_its_check_says_so_beside_its_agreement() -> None:
    """One of two int8 replicates failed its equivalence check: the table showed int8 with
    "top-1 agreement 1.00" from the one that passed. Now its row says what it lost."""
    rows = pd.DataFrame(_inference("fp32", "dynamic", 1, [2.0, 2.1], 1.0)
                        + _inference("int8", "static", 1, [1.5], 1.0))
    failed = pd.DataFrame([{"run_id": "lost", "system": "openvino", "entry": "infer",
                            "status": "FAILED", "params.precision": "int8",
                            "params.quantization": "static",
                            "failure_reason": "WorkloadError: equivalence check failed: "
                                              "top-1 agreement 0.625 < 0.75"}])
    table = inference_precision_table(rows, failed)
    assert table is not None
    (row,) = [dict(zip(table.headings, r, strict=True)) for r in table.cells]
    assert row["failed runs"] == ("int8-static: failed in 1 of 2 runs (equivalence check "
                                  "failed: top-1 agreement 0.625 < 0.75)")
    assert table.headings.index("failed runs") == table.headings.index("runs vs fp32 runs") + 1
    assert "failed runs" not in inference_precision_table(rows).headings  # none lost: no column
