"""The report's two comparison tables, with the papers' columns, and what is missing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from mlflow_dlaas.figures import significant
from mlflow_dlaas.report.aggregate import NOT_SHOWN, aggregate, shown_settings
from mlflow_dlaas.report.collect import ACCURACY_COLUMN
from mlflow_dlaas.report.derived import (
    ENERGY,
    ENERGY_PER_1000,
    PEAK_MEMORY,
    TREE_PEAK,
)
from mlflow_dlaas.report.energy_estimate import (
    ESTIMATED,
    ESTIMATED_HIGH,
    ESTIMATED_LOW,
    PER_1000_HIGH,
    PER_1000_LOW,
    SOURCE_COLUMN,
)
from mlflow_dlaas.report.formatting import setting_text
from mlflow_dlaas.runs import schema


@dataclass(frozen=True)
class Column:
    """One reported quantity: heading, metric key, scale into the heading's unit (shown at
    three significant digits)."""

    heading: str
    metric: str
    scale: float = 1.0

    @property
    def key(self) -> str:
        return f"metrics.{self.metric}"


TRAINING_COLUMNS = (
    Column("train time (s)", schema.TRAIN_TIME),
    Column("test time (s)", schema.TEST_TIME),
    Column("accuracy", schema.TEST_ACCURACY),
    Column("time to accuracy (s)", schema.TIME_TO_ACCURACY),
    Column("peak memory (MB)", PEAK_MEMORY),
    Column("CPU % (train)", schema.TRAIN_MEAN_CPU),
    Column("GFLOP/s (train)", schema.TRAIN_GFLOPS),
    Column("fraction of peak", schema.FRACTION_OF_PEAK),
    Column("energy, whole run, measured (J)", ENERGY),
    Column("energy, whole run, estimated from CPU time: low (J)", ESTIMATED_LOW),
    Column("… high (J)", ESTIMATED_HIGH),
)
INFERENCE_COLUMNS = (
    Column("p50 (ms)", schema.P50_LATENCY),
    Column("p99 (ms)", schema.P99_LATENCY),
    Column("throughput (samples/s)", schema.INFERENCE_THROUGHPUT),
    Column("offline p99 (ms)", schema.scenario_key("offline", schema.LATENCY_P99)),
    Column("load time (s)", schema.LOAD_TIME),
    Column("top-1 agreement with the reference", schema.EQUIVALENCE_TOP1_AGREEMENT),
    Column("output deviation (of max |ref|)", schema.EQUIVALENCE_MAX_RELATIVE_ERROR),
    Column("peak memory (MB)", PEAK_MEMORY),
    Column("energy per 1,000, measured (J)", ENERGY_PER_1000),
    Column("energy per 1,000, estimated from CPU time: low (J)", PER_1000_LOW),
    Column("… high (J)", PER_1000_HIGH),
)
#: The scenarios measured once per run (not per batch size): server and multi-stream.
SCENARIO_COLUMNS = (
    Column("server max QPS within p99 bound", schema.SERVER_MAX_QPS),
    Column("server p99 at max QPS (ms)", schema.SERVER_P99_AT_MAX_QPS),
    Column("server offered (queries/s)", schema.SERVER_TARGET_QPS),
    Column("server achieved (queries/s)", schema.SERVER_ACHIEVED_QPS),
    Column("server p99 (ms)", schema.scenario_key("server", schema.LATENCY_P99)),
    Column("server queries", schema.scenario_key("server", schema.QUERY_COUNT)),
    Column("multi-stream p99 (ms)", schema.scenario_key("multi_stream", schema.LATENCY_P99)),
    Column("multi-stream queries", schema.scenario_key("multi_stream", schema.QUERY_COUNT)),
)
#: The columns every table's statistics carry, whatever the section: who (``system``), how
#: many runs (``runs``) and which (``run_ids``, a list of MLflow run ids). The CSVs, the HTML
#: and the recommendations rely on them.
STATS_CONTRACT = ("system", "runs", "run_ids")


@dataclass(frozen=True)
class ComparisonTable:
    """Rendered cells (strings) plus the numbers and run ids behind them; a table whose
    statistics break :data:`STATS_CONTRACT` cannot be built."""

    title: str
    headings: list[str]
    cells: list[list[str]]
    hints: list[list[str]]  # per cell: mean ± sd and n, shown on hover in the HTML
    stats: pd.DataFrame
    missing: list[str]
    #: settings with one value in every row: kept out of the columns, shown folded away
    shared: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        lacking = [c for c in STATS_CONTRACT if c not in self.stats.columns]
        if lacking and len(self.stats):
            raise ValueError(f"table {self.title!r}: its statistics lack {lacking} "
                             f"(every table carries {list(STATS_CONTRACT)})")
        if len(self.stats) and not all(isinstance(ids, (list, tuple))
                                       for ids in self.stats["run_ids"]):
            raise ValueError(f"table {self.title!r}: run_ids must be a list of run ids per row")
        if len(self.cells) != len(self.hints) or any(
                len(row) != len(self.headings) for row in (*self.cells, *self.hints)):
            raise ValueError(f"table {self.title!r}: every row needs one cell and one hint "
                             f"per heading ({len(self.headings)})")

    def stats_csv(self) -> pd.DataFrame:
        """The statistics as written to CSV: every list of run ids joined by commas."""
        if self.stats.empty:
            return self.stats
        lists = [c for c in self.stats.columns
                 if self.stats[c].map(lambda v: isinstance(v, (list, tuple))).all()]
        return self.stats.assign(**{c: self.stats[c].map(",".join) for c in lists})


def comparison_table(title: str, rows: pd.DataFrame, columns: tuple[Column, ...]
                     ) -> ComparisonTable:
    """Replicates aggregated; each cell ``median [q1-q3]`` (the IQR) when n > 1."""
    stats = aggregate(rows, [c.key for c in columns])
    settings = [c for c in shown_settings(stats) if c != "system"] if len(stats) else []
    headings = ["system", *(_label(s) for s in settings), "runs",
                *(c.heading for c in columns)]
    cells, hints = [], []
    for _, row in stats.sort_values(["system", *settings]).iterrows():
        cells.append([str(row["system"]), *(setting_cell(row, s) for s in settings),
                      str(row["runs"]),
                      *(_cell(row, c) for c in columns)])
        hints.append([""] * (len(settings) + 2) + [_hint(row, c) for c in columns])
    return ComparisonTable(title, headings, cells, hints, stats, missing_notes(rows, columns),
                           shared_settings(stats, settings))


def shared_settings(stats: pd.DataFrame, shown: list[str]) -> list[tuple[str, str]]:
    """The params set to one value in every row (unset ones left out): what the table's
    columns leave out because nothing differs."""
    found = []
    for column in sorted(c for c in stats.columns if c.startswith("params.")):
        if column in shown or column in NOT_SHOWN or column.startswith("params.in_force_"):
            continue
        values = stats[column]
        if values.nunique(dropna=False) == 1 and setting_text(values.iloc[0]) != "default":
            found.append((_label(column), setting_text(values.iloc[0], 60)))
    return found


def missing_notes(rows: pd.DataFrame, columns: tuple[Column, ...]) -> list[str]:
    """One sentence per column that some or all runs lack."""
    notes = []
    total = rows["run_id"].nunique() if len(rows) else 0
    estimates = (ESTIMATED_LOW, ESTIMATED_HIGH, PER_1000_LOW, PER_1000_HIGH)
    for column in columns:
        have = rows.loc[rows[column.key].notna(), "run_id"].nunique() if column.key in rows else 0
        if column.metric in estimates and SOURCE_COLUMN in rows:  # none where measured
            have += rows.loc[~rows[SOURCE_COLUMN].isin(["", ESTIMATED]), "run_id"].nunique()
        if total and have < total:
            notes.append(f"{column.heading}: `{column.metric}` is missing in "
                         f"{total - have} of {total} runs{_why(column.metric, rows)}")
    return notes


def _why(metric: str, rows: pd.DataFrame) -> str:
    if "accuracy" in metric and ACCURACY_COLUMN in rows and (
            rows[ACCURACY_COLUMN] == schema.ACCURACY_NOT_MEASURED).any():
        return " (not measured where a run trained on synthetic data: random labels)"
    if metric in (schema.TRAIN_GFLOPS, schema.FRACTION_OF_PEAK):
        return (" (made before FLOPs were counted, or no CPU peak could be derived: the "
                f"run's {schema.PEAK_TAG} tag says why)")
    if "energy" in metric:
        if "estimated" in metric:
            return " (no CPU time logged)"
        return (" (no readable RAPL counter or NVIDIA GPU where they ran: the estimated "
                "columns give an interval from CPU time instead)")
    if metric == schema.TIME_TO_ACCURACY:
        return " (they never reached their target_accuracy)"
    if metric == PEAK_MEMORY:
        return f" (they logged neither {PEAK_MEMORY} nor {TREE_PEAK})"
    return ""


def setting_cell(row: pd.Series, column: str, width: int | None = 32) -> str:
    """A setting's cell: a served training run's model by its architecture and the run
    (``lenet5 (trained in run-1a2b3c4d)``); an unset thread count with the count its run read back
    (``default (1)``: MXNet's default on a 2-core x86 machine is one thread), where that is a
    real count (TensorFlow's 0 means "its own default")."""
    text = setting_text(row[column], width)
    architecture = setting_text(row.get("params.architecture"))
    if column == "params.model" and architecture not in ("", "default") and text != architecture:
        return f"{architecture} (trained in {text})"  # a served training run: run-1a2b3c4d
    in_force = setting_text(row.get(column.replace("params.", "params.in_force_", 1)))
    if text == "default" and in_force.isdigit() and in_force != "0":
        return f"default ({in_force})"
    return text


def _label(column: str) -> str:
    return column.removeprefix("params.")


def _cell(row: pd.Series, column: Column) -> str:
    median = row[f"{column.key}|median"]
    if median is None or (isinstance(median, float) and math.isnan(median)):
        return "—"
    text = significant(median * column.scale)
    if row[f"{column.key}|n"] > 1:
        low = significant(row[f"{column.key}|q1"] * column.scale)
        high = significant(row[f"{column.key}|q3"] * column.scale)
        text += f" [{low}–{high}]"
    return text


def _hint(row: pd.Series, column: Column) -> str:
    n = int(row[f"{column.key}|n"])
    if not n:
        return ""
    mean = significant(row[f"{column.key}|mean"] * column.scale)
    sd = significant(row[f"{column.key}|sd"] * column.scale)
    return f"mean {mean} ± sd {sd}, n = {n}"



