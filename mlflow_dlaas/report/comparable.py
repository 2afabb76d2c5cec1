"""What may be compared: a run's configuration split into its workload, its factors and
nuisance; matched comparisons between two settings; effects between groups of runs.

- The **workload** is the task itself: the entry point (train, infer, your project), the
  host, the model, the data, the input shape or sequence length, how long it trains
  (epochs, max_steps), what defines a scenario. Runs
  of two workloads are never compared: a report answers each workload on its own.
- The **factors** are what a question varies: the framework or runtime, threads, the
  parallel libraries, hyper-parameters (the training batch size among them: a study chooses
  it), the inference batch size, the precision (its accuracy cost is the runs' own
  ``equivalence/*`` figures, shown beside its speed), every other param.
- **Nuisance** tells replicates apart or restates a result: the seed, the replicate, the
  monitor's interval, query counts, the settings read back (``in_force_*``).

Every table, ``recommend``, ``reproduce`` and the libraries table ask this module which runs
are configurations of one workload, and which runs match two settings' runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pandas as pd

from mlflow_dlaas.report.effect import ALPHA, Effect, Verdict, estimate
from mlflow_dlaas.report.formatting import setting_text
from mlflow_dlaas.sequential import SequentialRule

#: params of the task itself, for every entry point
WORKLOAD_PARAMS = ("architecture", "model", "dataset", "data_dir", "input_shape",
                   "input_dtype", "input_data", "sequence_length", "epochs", "max_steps",
                   "target_accuracy",
                   "multi_stream_samples", "server_p99_bound_ms", "server_target_qps",
                   "server_max_batch", "server_max_wait_ms", "ensemble_size", "ensemble_mode")
#: params that tell replicates apart or do not change what is measured
NUISANCE_PARAMS = ("seed", "monitor_interval", "stall_timeout_s", "log_model", "warmup_steps",
                   "warmup_budget_s",
                   "min_query_count", "min_duration_s", "warmup_queries", "rtol", "atol",
                   "batch_sizes", "scenarios")
#: prefixes of nuisance params: read-back settings and the validity check's thresholds
NUISANCE_PREFIXES = ("in_force_", "validity_")
#: info columns that belong to the workload (runs of two hosts are never pooled)
WORKLOAD_INFO = ("entry", "host", "project")
#: info columns that are factors
FACTOR_INFO = ("system", "batch_size")
#: the column telling replicates' rounds apart, where runs carry one
ROUND = "replicate"
#: the columns of a run ``decide`` measured: its session, its round, the session's budget
SESSION, DECIDE_ROUND, DECIDE_BUDGET = "decide_session", "decide_round", "decide_max_rounds"
#: how an effect over a decide session's rounds names its design
DECIDE_DESIGN = "rounds of decide"
#: complete interleaved rounds the paired test needs: 2 / 2^6 < ALPHA
PAIRED_ROUNDS = next(k for k in range(1, 64) if 2 / 2 ** k < ALPHA)


def is_nuisance(column: str) -> bool:
    """Whether a ``params.X`` column is nuisance."""
    name = column.removeprefix("params.")
    return name in NUISANCE_PARAMS or name.startswith(NUISANCE_PREFIXES)


def workload_columns(rows: pd.DataFrame) -> list[str]:
    """The columns that name the workload, those present in ``rows``."""
    params = [f"params.{n}" for n in WORKLOAD_PARAMS if f"params.{n}" in rows]
    return [c for c in WORKLOAD_INFO if c in rows] + params + (
        ["params.model_uri"] if _served_file(rows) else [])


def factor_columns(rows: pd.DataFrame) -> list[str]:
    """The columns a question may vary: system, inference batch size, every param that is
    neither workload nor nuisance."""
    workload = set(workload_columns(rows))
    info = [c for c in FACTOR_INFO if c in rows]
    return info + sorted(c for c in rows.columns if c.startswith("params.")
                         and c not in workload and not is_nuisance(c))


def configuration_columns(rows: pd.DataFrame) -> list[str]:
    """Workload and factors: runs equal in all of them are replicates of one configuration."""
    return workload_columns(rows) + factor_columns(rows)


def _served_file(rows: pd.DataFrame) -> bool:
    """Whether the runs serve a user's file or MLflow model (their ``model_source`` tag):
    then which file is part of the workload."""
    if "params.model_uri" not in rows or "model_source" not in rows:
        return False
    return bool(rows["model_source"].eq("user_model").any())


def row_keys(rows: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One string per row, equal where ``columns`` are equal (unset and empty alike)."""
    if rows.empty or not columns:
        return pd.Series("", index=rows.index, dtype=str)
    values = rows[list(columns)].astype(object)
    return values.where(values.notna(), "").astype(str).agg("\x1f".join, axis=1)


def _workload_values(rows: pd.DataFrame) -> pd.DataFrame:
    """The workload columns, with a served training run's architecture as its model: the
    ``model`` of an inference run that serves a training run's model names that run
    (``run-1a2b3c4d``, a factor: which framework trained the weights), its ``architecture``
    the task's model."""
    frame = rows[workload_columns(rows)].astype(object)
    if "params.architecture" in frame and "params.model" in frame:
        named = frame["params.architecture"].fillna("").astype(str) != ""
        frame.loc[named, "params.model"] = frame.loc[named, "params.architecture"]
    return frame.drop(columns=["params.architecture"], errors="ignore")


def workload_ids(rows: pd.DataFrame) -> pd.Series:
    """A label per row, equal for runs of one workload."""
    values = _workload_values(rows)
    return row_keys(values, list(values.columns))


@dataclass(frozen=True)
class Workload:
    """One workload's runs and its name in words."""

    label: str  # "train · model lenet5 · epochs 2 · batch_size 64", only what tells them apart
    rows: pd.DataFrame


def by_workload(rows: pd.DataFrame) -> list[Workload]:
    """``rows`` split by workload, in the order of their names, each named by its model,
    data and length and the other workload settings that differ between them."""
    if rows.empty:
        return []
    values = _workload_values(rows)
    ids = row_keys(values, list(values.columns))
    differing = [c for c in values.columns if values[c].astype(str).nunique(dropna=False) > 1]
    found = [Workload(describe(values[ids == key].iloc[0], differing), rows[ids == key])
             for key in dict.fromkeys(ids)]
    return sorted(found, key=lambda w: w.label)


def describe(row: pd.Series, columns: Sequence[str]) -> str:
    """The workload in words: its entry, model, data and length, then any other workload
    setting in ``columns`` (those that tell workloads apart): ``train · lenet5 on mnist5k ·
    2 epochs``."""
    def value(name: str) -> str:
        found = row.get(f"params.{name}")
        return "" if found is None or pd.isna(found) else str(found)

    parts = [str(row.get("entry", "") or "")]
    model, dataset = value("model"), value("dataset")
    parts.append(f"{model} on {dataset}" if model and dataset else model or dataset)
    for name, unit in (("epochs", "epoch"), ("max_steps", "step")):
        count = value(name)
        if count not in ("", "0"):
            parts.append(f"{count} {unit}{'' if count == '1' else 's'}")
    shown = {"entry", "host", "params.model", "params.dataset", "params.epochs",
             "params.max_steps"}
    parts += [f"{c.removeprefix('params.')}={setting_text(row[c])}" for c in columns
              if c not in shown]
    return " · ".join(p for p in parts if p) or "all runs"


@dataclass(frozen=True)
class Cell:
    """Runs of two settings equal in everything else: one stratum of a matched comparison."""

    settings: dict[str, str]  # the other configuration columns' values
    chosen: pd.DataFrame
    baseline: pd.DataFrame


@dataclass(frozen=True)
class Matching:
    """The cells where both sides ran, and the runs of either side with no counterpart."""

    cells: tuple[Cell, ...]
    unmatched_chosen: tuple[str, ...]  # run ids
    unmatched_baseline: tuple[str, ...]
    #: the other configuration columns that take several values in the compared runs
    varying: tuple[str, ...] = ()

    @property
    def chosen_ids(self) -> list[str]:
        return [r for c in self.cells for r in c.chosen["run_id"]]

    @property
    def baseline_ids(self) -> list[str]:
        return [r for c in self.cells for r in c.baseline["run_id"]]

    def held(self) -> list[str]:
        """``name=value`` of the settings that vary among the compared runs but are equal
        in every matched cell: what the comparison held fixed that could have differed."""
        if not self.cells:
            return []
        first = self.cells[0].settings
        return [f"{k.removeprefix('params.')}={setting_text(first[k])}" for k in self.varying
                if all(c.settings[k] == first[k] for c in self.cells)]

    def pooled(self) -> list[str]:
        """The settings that differ between cells: the comparison pooled over them."""
        if len(self.cells) < 2:
            return []
        return [k.removeprefix("params.") for k in self.cells[0].settings
                if len({c.settings[k] for c in self.cells}) > 1]

    def effect(self, metric: str, *, lower_is_better: bool) -> Effect:
        """The chosen setting against the baseline on ``metric`` (a ``metrics.*`` column),
        within cells: the paired test over rounds where a single cell ran in enough
        complete interleaved rounds, else the cells as strata."""
        if len(self.cells) == 1:
            return effect_between(self.cells[0].chosen, self.cells[0].baseline, metric,
                                  lower_is_better=lower_is_better)
        strata = [(_values(c.chosen, metric), _values(c.baseline, metric)) for c in self.cells]
        return estimate(strata, lower_is_better=lower_is_better,
                        design=f"matched within {len(self.cells)} cells (pooled over "
                               f"{', '.join(self.pooled()) or 'nothing'})")


def match(rows: pd.DataFrame, column: str, chosen: Sequence[str], baseline: Sequence[str]
          ) -> Matching:
    """Runs whose ``column`` is in ``chosen`` set against runs whose ``column`` is in
    ``baseline``, cell by cell: a cell holds every other configuration column fixed."""
    others = [c for c in configuration_columns(rows) if c != column]
    values = rows[column].where(rows[column].notna(), "").astype(str)
    keys = row_keys(rows, others)
    cells, lone_chosen, lone_baseline = [], [], []
    for key in dict.fromkeys(keys):
        here = keys == key
        a, b = rows[here & values.isin(chosen)], rows[here & values.isin(baseline)]
        if len(a) and len(b):
            first = rows[here].iloc[0]
            cells.append(Cell({c: str(first[c]) if pd.notna(first[c]) else "" for c in others},
                              a, b))
        else:
            lone_chosen += list(a["run_id"])
            lone_baseline += list(b["run_id"])
    varying = tuple(c for c in others
                    if rows[c].where(rows[c].notna(), "").astype(str).nunique() > 1)
    return Matching(tuple(cells), tuple(lone_chosen), tuple(lone_baseline), varying)


def effect_between(a: pd.DataFrame, b: pd.DataFrame, metric: str, *,
                   lower_is_better: bool) -> Effect:
    """Two configurations' runs on ``metric``: over the rounds of the latest ``decide``
    session both ran in, by its sequential rule; else paired by round where they ran in at
    least :data:`PAIRED_ROUNDS` complete interleaved rounds; else unpaired (saying why)."""
    decided = decide_rounds(a, b, metric)
    if decided is not None:
        rounds, rule = decided
        found = estimate(rounds, lower_is_better=lower_is_better, alpha=rule.level,
                         design=f"paired over {len(rounds)} {DECIDE_DESIGN} (a look after "
                                f"each, level {rule.level:.2g} a look)")
        first = rule.looks[0] if rule.looks else rule.max_rounds
        if len(rounds) < first or found.verdict is Verdict.TOO_FEW:
            return replace(found, verdict=Verdict.TOO_FEW, low=math.nan, high=math.nan,
                           shortfall=f"{len(rounds)} {DECIDE_DESIGN}; its rule's first "
                                     f"look is at round {first}")
        return found
    rounds = interleaved_rounds(a, b, metric)
    if rounds is not None and len(rounds) >= PAIRED_ROUNDS:
        return estimate(rounds, lower_is_better=lower_is_better,
                        design=f"paired over {len(rounds)} interleaved rounds")
    design = "unpaired"
    if rounds is not None:
        design += f" ({len(rounds)} interleaved rounds; pairing needs {PAIRED_ROUNDS})"
    return estimate([(_values(a, metric), _values(b, metric))],
                    lower_is_better=lower_is_better, design=design)


def decide_rounds(a: pd.DataFrame, b: pd.DataFrame, metric: str
                  ) -> tuple[list[tuple[list[float], list[float]]], SequentialRule] | None:
    """Per round of the latest ``decide`` session both sides ran in, the two sides' values
    (rounds where either lacks one left out), and that session's rule; None where they
    share no session."""
    if SESSION not in a or SESSION not in b or metric not in a or metric not in b:
        return None
    sessions = [side[side[SESSION].fillna("").astype(str) != ""] for side in (a, b)]
    common = set(sessions[0][SESSION]) & set(sessions[1][SESSION])
    if not common:
        return None
    latest = max(common, key=lambda s: max(side.loc[side[SESSION] == s, "start_time"].max()
                                           for side in sessions))
    here = [side[side[SESSION] == latest] for side in sessions]
    budget = pd.to_numeric(here[0].get(DECIDE_BUDGET), errors="coerce").max()
    rule = SequentialRule(int(budget)) if pd.notna(budget) else SequentialRule()
    values = [{str(r): v for r, v in zip(side[DECIDE_ROUND],
                                         pd.to_numeric(side[metric], errors="coerce"),
                                         strict=True) if pd.notna(v)} for side in here]
    shared = sorted(set(values[0]) & set(values[1]), key=int)
    return [([values[0][r]], [values[1][r]]) for r in shared], rule


def interleaved_rounds(a: pd.DataFrame, b: pd.DataFrame, metric: str
                       ) -> list[tuple[list[float], list[float]]] | None:
    """Per round, the two sides' values, where both ran once in each of the same rounds and
    round r of both started after round r - 1 of both ended (A B, A B, ...); else None."""
    if ROUND not in a or ROUND not in b or "start_time" not in a or metric not in a:
        return None
    sides = [side[side[ROUND].astype(str) != ""] for side in (a, b)]
    if any(len(s) != len(side) or s[ROUND].duplicated().any()
           for s, side in zip(sides, (a, b), strict=True)):
        return None
    if set(sides[0][ROUND]) != set(sides[1][ROUND]) or len(sides[0]) < 2:
        return None
    order = sorted(set(sides[0][ROUND]), key=lambda r: (len(str(r)), str(r)))
    by_round = [pd.concat([s[s[ROUND] == r] for s in sides]) for r in order]
    for earlier, later in zip(by_round, by_round[1:], strict=False):
        if later["start_time"].min() < earlier["end_time"].max():
            return None
    return [(_values(sides[0][sides[0][ROUND] == r], metric),
             _values(sides[1][sides[1][ROUND] == r], metric)) for r in order]


def _values(rows: pd.DataFrame, metric: str) -> list[float]:
    if metric not in rows:
        return []
    return [float(v) for v in pd.to_numeric(rows[metric], errors="coerce").dropna()]
