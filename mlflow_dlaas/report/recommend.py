"""The best configuration for an objective under constraints, with the evidence runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from mlflow import MlflowClient

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.figures import percent, significant
from mlflow_dlaas.report.aggregate import (
    aggregate,
    configuration_ids,
    geometric_mean,
    shown_settings,
)
from mlflow_dlaas.report.collect import ACCURACY_COLUMN
from mlflow_dlaas.report.comparable import DECIDE_DESIGN, by_workload, effect_between
from mlflow_dlaas.report.effect import Effect, Verdict
from mlflow_dlaas.report.failures import (
    FailureCount,
    count_by_configuration,
    failed_like,
    matching_columns,
    never_finished,
)
from mlflow_dlaas.report.formatting import setting_text
from mlflow_dlaas.report.screening import counted_runs_label, counts_toward_winner
from mlflow_dlaas.report.settings_apart import by_setting, decided_in_part, recipe_decided
from mlflow_dlaas.report.tables import setting_cell
from mlflow_dlaas.runs.goals import Bound, Goal
from mlflow_dlaas.runs.schema import (
    ACCURACY_NOT_MEASURED,
    CUMULATIVE_TRAIN_TIME,
    EPOCH_TEST_ACCURACY,
    unit_of,
)
from mlflow_dlaas.runs.ui_links import run_url
from mlflow_dlaas.sequential import SequentialRule

RUNNERS_UP = 3
#: relative spreads (IQR over median) further apart than this factor are said, where both
#: sides have at least SPREAD_RUNS runs
SPREAD_RATIO, SPREAD_RUNS = 2.0, 4
#: columns of the ranking statistic: its value, its runs, whether they are counted runs
RANK_VALUE, RANK_RUNS, RANK_COUNTED = "rank|gmean", "rank|n", "rank|counted"
HISTORY_THREADS = 8


@dataclass(frozen=True)
class Evidence:
    run_id: str
    run_name: str
    link: str


@dataclass(frozen=True)
class Recommendation:
    """The answer for one workload, or why there is none (``best`` empty)."""

    goal: Goal
    bounds: tuple[Bound, ...]
    considered: int
    excluded: dict[str, int]
    best: dict[str, str] = field(default_factory=dict)  # setting -> its full value
    value: str = ""  # the best's median with its unit and spread
    evidence: tuple[Evidence, ...] = ()
    #: the runs of the next best, the configuration the verdict compares the best with
    rival_run_ids: tuple[str, ...] = ()
    #: for an open answer, the runs of each configuration not yet told from the best (the
    #: next best first): what ``decide`` measures more of
    contender_run_ids: tuple[tuple[str, ...], ...] = ()
    runners_up: tuple[tuple[dict[str, str], str], ...] = ()
    #: the best against the next best: the ratio, its interval and the verdict
    effect: Effect | None = None
    #: the workload this answer is for (``train · epochs=2``); '' for one workload
    workload: str = ""
    runs_label: str = "valid runs"
    #: the best's failed runs against all it had (None: none failed)
    best_failures: FailureCount | None = None
    #: configurations tried whose every run failed, in words
    never_finished: tuple[str, ...] = ()
    #: where the best's and the next best's relative spreads differ markedly, in words
    spreads: str = ""
    #: for an open answer: about how many more rounds would settle it, in words
    settle: str = ""
    #: for an open answer: the settings decided one by one (the others held fixed), in words
    in_part: str = ""
    #: every setting of the recipe decided one by one (:func:`recipe_decided`): decided
    by_settings: bool = False
    #: the best configuration's values of the objective, one per run (hosts set side by side)
    best_values: tuple[float, ...] = ()

    @property
    def found(self) -> bool:
        return bool(self.best)

    @property
    def compares(self) -> bool:
        """Whether the answer compares configurations (a question the report asks); one
        with no run, or a single qualifying configuration, is a note."""
        return self.found and bool(self.runners_up) and self.effect is not None

    @property
    def decided(self) -> bool:
        """Whether the comparison is settled: a winner, or no meaningful difference."""
        return self.compares and self.verdict in ("winner", "tie", "settings")

    @property
    def verdict(self) -> str:
        """``winner``, ``tie``, ``open`` or ``none``: how sure the answer is, for styling."""
        if not self.found:
            return "none"
        if self.effect is None or self.effect.verdict in (Verdict.NOT_SEPARABLE,
                                                          Verdict.TOO_FEW):
            if not self.runners_up:
                return "only"
            if self.by_settings:
                return "settings"
            return "part" if self.in_part else "open"
        return "tie" if self.effect.verdict is Verdict.NO_DIFFERENCE else "winner"

    def wanted(self) -> str:
        """``lowest train time (train_time_seconds) with peak_memory<=2GiB``."""
        extreme = "lowest" if self.goal.direction == "minimize" else "highest"
        wanted = f"{extreme} {self.goal.text}"
        if self.goal.text != self.goal.metric:
            wanted += f" ({self.goal.metric})"
        if self.bounds:
            wanted += " with " + " and ".join(b.text for b in self.bounds)
        return wanted

    def sentence(self) -> str:
        """One line a person reads first: the winner, its figure with its unit, by how much
        and how sure (``pytorch with intra_op_threads=2: lowest train time
        (train_time_seconds), 1.15 s (geometric mean of 4 valid runs, IQR 1.10–1.20 s);
        ahead of the next best (tensorflow) by 12 % (ratio 0.880, 95 % CI 0.800–0.950)``)."""
        if not self.found:
            why = ", ".join(f"{n} by {k}" for k, n in self.excluded.items()) or "no runs"
            return (f"{self.wanted()}: no configuration qualifies ({self.considered} "
                    f"considered; excluded: {why})")
        failed = f"; but it {self.best_failures.text()}" if self.best_failures else ""
        return (f"{self.winner()}: {self.wanted()}, {self.value}{failed}; "
                f"{self.verdict_text()}")

    def verdict_text(self) -> str:
        """The best against the next best, in the report's words."""
        if not self.runners_up or self.effect is None:
            return "the only qualifying configuration: nothing to compare it with"
        words = self.effect.words(f"the next best ({self.runner_up_names()[0][0]})")
        if self.by_settings:  # decided, by its settings: the whole cells are the caveat
            return (f"decided setting by setting (below); as whole configurations, {words}"
                    + (f"; {self.spreads}" if self.spreads else ""))
        return "; ".join(part for part in (words, self.spreads, self.settle) if part)

    def test_text(self) -> str:
        """The test behind the verdict, for a person who checks it."""
        if self.effect is None or self.effect.verdict is Verdict.TOO_FEW:
            return ""
        return self.effect.test_text().replace(" runs", f" {self.runs_label}")

    def winner(self) -> str:
        """The best configuration's whole recipe: its system, then every setting that varies
        among the configurations compared (a reader can run it from this alone)."""
        settings = [f"{k}={setting_text(v)}" for k, v in self.best.items() if k != "system"]
        return _named(self.best.get("system", ""), settings) or "the only configuration"

    def runner_up_names(self) -> list[tuple[str, str]]:
        """Each runner-up as (its system and the settings in which it differs from the
        winner, its value): what a person needs to tell them apart."""
        return [(_named(settings.get("system", ""),
                        [f"{k}={setting_text(v)}" for k, v in settings.items()
                         if k != "system" and self.best.get(k) != v]) or "the same settings",
                 value) for settings, value in self.runners_up]

    def as_json(self) -> dict[str, object]:
        """Every figure and setting in full (never cut), for ``recommend --json``."""
        effect = self.effect
        return {"workload": self.workload, "found": self.found, "answer": self.sentence(),
                "verdict": self.verdict, "objective": self.goal.text,
                "metric": self.goal.metric, "direction": self.goal.direction,
                "unit": unit_of(self.goal.metric),
                "constraints": [b.text for b in self.bounds], "considered": self.considered,
                "excluded": self.excluded, "best": self.best, "value": self.value,
                "against_next_best": None if effect is None else {
                    "verdict": effect.verdict.value, "ratio": _finite(effect.ratio),
                    "ci95": [_finite(effect.low), _finite(effect.high)],
                    "p_value": effect.p_value, "test": self.test_text(),
                    "min_effect": effect.min_effect, "words": effect.words()},
                "failed_runs": None if self.best_failures is None else {
                    "failed": self.best_failures.failed, "of": self.best_failures.total,
                    "reason": self.best_failures.reason},
                "never_finished": list(self.never_finished),
                "decided_in_part": self.in_part,
                "evidence": [{"run_id": e.run_id, "run_name": e.run_name, "link": e.link}
                             for e in self.evidence],
                "runners_up": [{"settings": settings, "value": value}
                               for settings, value in self.runners_up]}


def _finite(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def _named(system: str, settings: list[str]) -> str:
    """``pytorch with intra_op_threads=2`` (or the parts there are)."""
    if not settings:
        return system
    return f"{system} with {', '.join(settings)}" if system else ", ".join(settings)


def add_time_to_accuracy(client: MlflowClient, train: pd.DataFrame, target: float,
                         key: str) -> pd.DataFrame:
    """Train time until test accuracy first reached ``target`` (from per-epoch history)."""
    def first_reached(run_id: str) -> float:
        accuracy = client.get_metric_history(run_id, EPOCH_TEST_ACCURACY)
        elapsed = {m.step: m.value for m in
                   client.get_metric_history(run_id, CUMULATIVE_TRAIN_TIME)}
        times = [elapsed[m.step] for m in sorted(accuracy, key=lambda m: m.step)
                 if m.value >= target and m.step in elapsed]
        return times[0] if times else np.nan

    with ThreadPoolExecutor(HISTORY_THREADS) as pool:
        values = list(pool.map(first_reached, train["run_id"]))
    return train.assign(**{f"metrics.{key}": values})


def recommend(rows: pd.DataFrame, goal: Goal, bounds: tuple[Bound, ...] = (),
              tracking_uri: str = "", *, include_disturbed: bool = False,
              failed: pd.DataFrame | None = None) -> Recommendation:
    """Aggregate replicates, drop configurations whose geometric means break a bound, pick
    the best geometric mean (of the runs that may decide a winner), and say whether a rank
    test on those runs (valid ones, or all with ``include_disturbed``) separates it from the
    next best. ``failed``: runs that FAILED (of any workload); those of a configuration are
    counted in its answer, and configurations that never finished are named."""
    keys = [f"metrics.{goal.metric}", *(f"metrics.{b.metric}" for b in bounds)]
    for key, what in zip(keys, ["objective", *(f"constraint {b.text!r}" for b in bounds)],
                         strict=True):
        refuse_accuracy_on_synthetic_data(rows, key.removeprefix("metrics."), what)
        if not rows.empty and key not in rows:
            raise ConfigError(f"no run logged {key.removeprefix('metrics.')!r} (the {what}); "
                              "check the name (see `mlflow-dlaas recommend --help`) or the "
                              "runs' entry point")
    stats = aggregate(rows, keys)
    if len(stats):
        stats = stats.merge(_ranked_by(rows, keys[0], include_disturbed), on="config",
                            how="left")
    candidates = stats[stats[RANK_VALUE].notna()] if len(stats) else stats
    excluded: dict[str, int] = {}
    if len(stats) > len(candidates):
        excluded[f"no {goal.metric}"] = len(stats) - len(candidates)
    for bound in bounds:
        typical = candidates.get(f"metrics.{bound.metric}|gmean",
                                 pd.Series(np.nan, index=candidates.index))
        keep = pd.Series([bool(np.isfinite(v)) and bound.holds(float(v)) for v in typical],
                         index=candidates.index, dtype=bool)
        if (~keep).any():
            excluded[bound.text] = int((~keep).sum())
        candidates = candidates[keep]
    failed = failed_like(rows, failed if failed is not None else rows.iloc[0:0])
    columns = matching_columns(rows)
    never = tuple(never_finished(stats, failed, columns)) if len(stats) else ()
    found = Recommendation(goal, bounds, len(stats), excluded, never_finished=never)
    if candidates.empty:
        return found
    ranked = candidates.sort_values(RANK_VALUE, kind="stable",
                                    ascending=goal.direction == "minimize")
    effect = _against_next_best(rows, ranked, keys[0], goal, include_disturbed)
    if effect is not None and _behind(effect, goal):  # decide's rounds reversed the order
        ranked = pd.concat([ranked.iloc[[1, 0]], ranked.iloc[2:]])
        effect = _against_next_best(rows, ranked, keys[0], goal, include_disturbed)
    shown = shown_settings(stats)
    best = ranked.iloc[0]
    names = rows.set_index("run_id")["run_name"].to_dict()
    experiments = rows.set_index("run_id")["experiment_id"].to_dict()
    measured = rows.set_index("run_id")[keys[0]].notna().to_dict()
    evidence = tuple(Evidence(r, str(names.get(r, "")), run_url(
        experiments.get(r, "0"), r, tracking_uri))
                     for r in best["run_ids"] if measured.get(r))  # the runs of the figure
    shortlist = ranked.iloc[:1 + RUNNERS_UP]
    failures = count_by_configuration(shortlist, [len(ids) for ids in shortlist["run_ids"]],
                                      failed, columns)
    return Recommendation(
        goal, bounds, len(stats), excluded, _settings(best, shown),
        _value(best, keys[0], include_disturbed), evidence,
        tuple(ranked.iloc[1]["run_ids"]) if len(ranked) > 1 else (),
        _contenders(rows, ranked, keys[0], goal, effect, include_disturbed),
        tuple((_settings(r, shown), _value(r, keys[0], include_disturbed)
               + (f"; {f.text()}" if f else ""))
              for (_, r), f in zip(shortlist.iloc[1:].iterrows(), failures[1:], strict=True)),
        effect, runs_label=counted_runs_label(include_disturbed=include_disturbed),
        best_failures=failures[0], never_finished=never,
        spreads=_spreads_differ(shortlist, keys[0]),
        settle=_settle(rows, ranked, keys[0], effect, include_disturbed),
        best_values=_values_of(rows, best["config"], keys[0]),
        **_in_part(rows, ranked, shown, keys[0], goal, effect, include_disturbed))


def recommend_each_workload(rows: pd.DataFrame, goal: Goal, bounds: tuple[Bound, ...] = (),
                            tracking_uri: str = "", *, include_disturbed: bool = False,
                            failed: pd.DataFrame | None = None) -> list[Recommendation]:
    """One answer per workload (:func:`~mlflow_dlaas.report.comparable.by_workload`): runs
    of two workloads (another model, data set, epoch count ...) are never ranked together."""
    workloads = by_workload(rows)
    if not workloads:
        return [recommend(rows, goal, bounds, tracking_uri,
                          include_disturbed=include_disturbed, failed=failed)]
    return [replace(recommend(w.rows, goal, bounds, tracking_uri,
                              include_disturbed=include_disturbed, failed=failed),
                    workload=w.label)
            for w in workloads]


def refuse_accuracy_on_synthetic_data(rows: pd.DataFrame, metric: str, what: str) -> None:
    """ConfigError where an accuracy ``metric`` is asked of runs that all trained on random
    labels (tag ``dlaas.accuracy``: not measured)."""
    column = ACCURACY_COLUMN
    if "accuracy" not in metric or rows.empty or column not in rows:
        return
    if (rows[column] == ACCURACY_NOT_MEASURED).all():
        datasets = sorted(set(rows.get("params.dataset", pd.Series(["synthetic"])).dropna()))
        raise ConfigError(f"{metric} (the {what}) is {ACCURACY_NOT_MEASURED}: these runs "
                          f"trained on {', '.join(datasets)}, random images with random labels; "
                          "choose a time, throughput, memory or energy goal, or train on real "
                          "data")


def _behind(effect: Effect, goal: Goal) -> bool:
    """Whether the ranked first is on the wrong side of 1 against the next best: the rounds
    of a ``decide`` session, which the effect rests on, can order them otherwise than the
    geometric means of all their runs."""
    if not np.isfinite(effect.ratio):
        return False
    return effect.ratio > 1 if goal.direction == "minimize" else effect.ratio < 1


def _against_next_best(rows: pd.DataFrame, ranked: pd.DataFrame, key: str, goal: Goal,
                       include_disturbed: bool) -> Effect | None:
    """The best configuration's counted runs against the next best's: the effect and its
    verdict (None where there is no next best)."""
    if len(ranked) < 2:
        return None
    configs = configuration_ids(rows)  # the labels ``aggregate`` gave the ranked rows
    counted = counts_toward_winner(rows, include_disturbed=include_disturbed)
    best, rival = (rows[(configs == ranked.iloc[i]["config"]) & counted] for i in (0, 1))
    return effect_between(best, rival, key, lower_is_better=goal.direction == "minimize")


def _contenders(rows: pd.DataFrame, ranked: pd.DataFrame, key: str, goal: Goal,
                effect: Effect | None, include_disturbed: bool) -> tuple[tuple[str, ...], ...]:
    """For an open answer: the run ids of the next best and of each other configuration of
    the shortlist that is not yet told from the best (neither decided worse nor equal)."""
    if effect is None or effect.verdict.decided or effect.verdict is Verdict.NO_DIFFERENCE:
        return ()
    found = [tuple(ranked.iloc[1]["run_ids"])]
    configs = configuration_ids(rows)
    counted = counts_toward_winner(rows, include_disturbed=include_disturbed)
    best = rows[(configs == ranked.iloc[0]["config"]) & counted]
    for i in range(2, min(len(ranked), 1 + RUNNERS_UP)):
        other = rows[(configs == ranked.iloc[i]["config"]) & counted]
        against = effect_between(best, other, key,
                                 lower_is_better=goal.direction == "minimize")
        if against.verdict in (Verdict.NOT_SEPARABLE, Verdict.TOO_FEW):
            found.append(tuple(ranked.iloc[i]["run_ids"]))
    return tuple(found)


def _in_part(rows: pd.DataFrame, ranked: pd.DataFrame, shown: list[str], key: str,
             goal: Goal, effect: Effect | None, include_disturbed: bool) -> dict[str, Any]:
    """For an open answer among three or more configurations: the leader's settings that
    are decided one by one, each matched cell by cell with the others held fixed
    (``in_part``), and whether that decides the whole recipe (``by_settings``)."""
    if effect is None or effect.verdict.decided or effect.verdict is Verdict.NO_DIFFERENCE \
            or len(ranked) < 3:
        return {}
    configs = configuration_ids(rows)
    counted = rows[counts_toward_winner(rows, include_disturbed=include_disturbed)
                   & configs.isin(ranked["config"])]
    columns = [c for c in shown if c.startswith("params.")]
    leader = {c: "" if pd.isna(ranked.iloc[0][c]) else str(ranked.iloc[0][c])
              for c in columns if c in ranked}
    verdicts = by_setting(counted, leader, columns, key,
                          lower_is_better=goal.direction == "minimize")
    return {"in_part": decided_in_part(verdicts), "by_settings": recipe_decided(verdicts)}


def _settings(row: pd.Series, shown: list[str]) -> dict[str, str]:
    """The configuration's settings in full (``default (2)`` for an unset thread count)."""
    return {c.removeprefix("params."): setting_cell(row, c, width=None) for c in shown}


def _values_of(rows: pd.DataFrame, config: str, key: str) -> tuple[float, ...]:
    """The positive values of ``key`` in the runs of configuration ``config``."""
    values = pd.to_numeric(rows.loc[configuration_ids(rows) == config, key], errors="coerce")
    return tuple(float(v) for v in values.dropna() if v > 0)


def _ranked_by(rows: pd.DataFrame, key: str, include_disturbed: bool) -> pd.DataFrame:
    """Per configuration, the statistic answers rank by: the geometric mean of the runs
    that may decide a winner (every run of a configuration that has none of those), and
    how many runs it is over. The effect against the next best is the ratio of two of
    these, so a winner's ratio is never on the wrong side of 1."""
    values = pd.to_numeric(rows[key], errors="coerce") if key in rows else pd.Series(
        np.nan, index=rows.index)
    values = values.where(values > 0)
    configs = configuration_ids(rows)
    counted = counts_toward_winner(rows, include_disturbed=include_disturbed)
    deciding = values.where(counted)
    has_deciding = deciding.notna().groupby(configs).transform("any")
    used = deciding.where(has_deciding, values)
    grouped = used.groupby(configs, sort=False)
    return pd.DataFrame({RANK_VALUE: grouped.agg(geometric_mean),
                         RANK_RUNS: grouped.count(),
                         RANK_COUNTED: has_deciding.groupby(configs, sort=False).first()}
                        ).rename_axis("config").reset_index()


def _settle(rows: pd.DataFrame, ranked: pd.DataFrame, key: str, effect: Effect | None,
            include_disturbed: bool) -> str:
    """For an open answer: ``about 9 more rounds of mlflow-dlaas decide (about 3 min at this
    pace) would settle it``, from the two sides' spread (the sequential rule's estimate)."""
    if effect is None or effect.verdict not in (Verdict.NOT_SEPARABLE, Verdict.TOO_FEW):
        return ""
    configs = configuration_ids(rows)
    counted = counts_toward_winner(rows, include_disturbed=include_disturbed)
    sides = [rows[(configs == ranked.iloc[i]["config"]) & counted] for i in (0, 1)]
    logs = [np.log(v[v > 0]) for v in (pd.to_numeric(side[key], errors="coerce").dropna()
                                       for side in sides)]
    spread = math.sqrt(sum(float(np.var(v, ddof=1)) if len(v) > 1 else math.nan
                           for v in logs))
    done = effect.runs[0] if DECIDE_DESIGN in effect.design else 0
    rule = SequentialRule()
    more = rule.rounds_needed(math.log(effect.ratio) if effect.ratio > 0 else 0.0, spread, done)
    seconds = sum(float(np.nanmedian((side["end_time"] - side["start_time"]) / 1000))
                  for side in sides if "end_time" in side and len(side))
    total = more * seconds
    pace = "" if total <= 0 else (f" (about {significant(total)} s at this pace)" if total < 90
                                  else f" (about {significant(total / 60)} min at this pace)")
    beyond = (f", beyond decide's default budget of {rule.max_rounds} rounds"
              if done + more > rule.max_rounds else "")
    return (f"about {more} more rounds of mlflow-dlaas decide{pace} would settle it"
            f"{beyond}")


def _spreads_differ(shortlist: pd.DataFrame, key: str) -> str:
    """``spreads differ: IQR 21 % of the median against 3 %`` where the best's and the next
    best's relative IQRs are more than :data:`SPREAD_RATIO` apart (a ratio of typical values
    then hides that one is far less predictable), else ''."""
    if len(shortlist) < 2 or (shortlist.iloc[:2][f"{key}|n"] < SPREAD_RUNS).any():
        return ""  # the IQR of fewer runs says little of a spread
    relative = [(r[f"{key}|q3"] - r[f"{key}|q1"]) / r[f"{key}|median"]
                for _, r in shortlist.iloc[:2].iterrows()]
    if not all(np.isfinite(relative)) or min(relative) <= 0:
        return ""
    if max(relative) / min(relative) <= SPREAD_RATIO:
        return ""
    return (f"spreads differ: IQR {percent(relative[0])} of the median against "
            f"{percent(relative[1])} for the next best")


def _value(row: pd.Series, key: str, include_disturbed: bool) -> str:
    """``1.15 s (geometric mean of 4 valid runs, IQR 1.10–1.20 s)``."""
    value, n = row[RANK_VALUE], int(row[RANK_RUNS])
    unit = unit_of(key)
    unit = f" {unit}" if unit else ""
    runs = counted_runs_label(include_disturbed=include_disturbed) if row[RANK_COUNTED] \
        else "runs"
    if n > 1:
        return (f"{significant(value)}{unit} (geometric mean of {n} {runs}, IQR "
                f"{significant(row[f'{key}|q1'])}–{significant(row[f'{key}|q3'])}{unit})")
    return f"{significant(value)}{unit} (1 run)"


#: How the count of decided questions opens: a report whose answers compare nothing has none.
DECIDED_PREFIX = "decided: "


def decided_line(answers: Sequence[Recommendation]) -> str:
    """``decided: 3 of 5 questions; 2 open (each says what would settle it)``; '' for none."""
    asked = [a for a in answers if a.compares]
    if not asked:
        return ""
    settled = sum(a.decided for a in asked)
    part = sum(a.verdict == "part" for a in asked)
    still = len(asked) - settled
    return (f"{DECIDED_PREFIX}{settled} of {len(asked)} questions"
            + (f"; {still} open (each says how many more rounds of mlflow-dlaas decide "
               "would settle it" + (f"; {part} decided setting by setting in part"
                                    if part else "") + ")" if still else ""))
