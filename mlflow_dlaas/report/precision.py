"""The report's precision tables: each reduced precision (bf16, int8) against fp32 on the
same workload, system and settings: its speed-up and its accuracy cost, like for like
(:mod:`mlflow_dlaas.report.against_baseline`).

Training weighs train time against test accuracy; inference weighs latency and
throughput, per batch size, against the agreement of its outputs with the fp32 reference
(top-1 agreement and output deviation, measured by every inference run). An int8 model's
quantization (``static``: calibrated ahead, ``dynamic``) is part of its precision here,
and a run that logged no precision ran fp32.
"""

from __future__ import annotations

import pandas as pd

from mlflow_dlaas.report.against_baseline import Comparison, Measure, against_baseline
from mlflow_dlaas.report.tables import ComparisonTable
from mlflow_dlaas.runs import schema

PRECISION = "params.precision"
QUANTIZATION = "params.quantization"
BASELINES = ("", "fp32")
TRAINING = Comparison(
    "Precision in training (against fp32, like for like)", (PRECISION,), BASELINES, "fp32",
    (Measure("train time (s)", schema.TRAIN_TIME),
     Measure("accuracy", schema.TEST_ACCURACY, lower_is_better=False)),
    show_baseline=True)
INFERENCE = Comparison(
    "Precision in inference (against fp32, per batch size, like for like)", (PRECISION,),
    BASELINES, "fp32",
    (Measure("p50 (ms)", schema.P50_LATENCY),
     Measure("throughput (samples/s)", schema.INFERENCE_THROUGHPUT, lower_is_better=False),
     Measure("top-1 agreement with fp32", schema.EQUIVALENCE_TOP1_AGREEMENT, judged=False),
     Measure("output deviation (of max |ref|)", schema.EQUIVALENCE_MAX_RELATIVE_ERROR,
             judged=False)),
    apart=("batch_size",), show_baseline=True)


def training_precision_table(train: pd.DataFrame, failed: pd.DataFrame | None = None
                             ) -> ComparisonTable | None:
    """bf16 training against fp32, or None where every run trained in fp32; ``failed``
    runs are counted beside each precision's."""
    return against_baseline(train, TRAINING, failed)


def inference_precision_table(inference: pd.DataFrame, failed: pd.DataFrame | None = None
                              ) -> ComparisonTable | None:
    """Each reduced precision's serving against fp32 (rows per batch size), or None where
    every run served fp32; ``failed`` runs (an int8 model that failed its equivalence
    check) are counted beside each precision's."""
    return against_baseline(_quantization_in_precision(inference), INFERENCE,
                            None if failed is None else _quantization_in_precision(failed))


def _quantization_in_precision(rows: pd.DataFrame) -> pd.DataFrame:
    """``int8-static`` / ``int8-dynamic`` as the precision, and no quantization column: an
    fp32 run's quantization setting means nothing, so it must not keep it from matching."""
    if PRECISION not in rows or QUANTIZATION not in rows:
        return rows
    precision = rows[PRECISION].fillna("").astype(str)
    int8 = precision == "int8"
    labelled = precision.where(~int8, "int8-" + rows[QUANTIZATION].fillna("").astype(str))
    return rows.assign(**{PRECISION: labelled}).drop(columns=[QUANTIZATION])
