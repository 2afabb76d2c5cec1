"""The best configuration for an objective under constraints, with the evidence runs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from mlflow import MlflowClient

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.report.aggregate import aggregate, configuration_ids, shown_settings
from mlflow_dlaas.report.collect import ACCURACY_COLUMN
from mlflow_dlaas.report.screening import counted_runs_label, counts_toward_winner
from mlflow_dlaas.report.separation import Separation, separate
from mlflow_dlaas.report.tables import setting_cell
from mlflow_dlaas.runs.goals import Bound, Goal
from mlflow_dlaas.runs.schema import (
    ACCURACY_NOT_MEASURED,
    CUMULATIVE_TRAIN_TIME,
    EPOCH_TEST_ACCURACY,
)

RUNNERS_UP = 3
HISTORY_THREADS = 8


@dataclass(frozen=True)
class Evidence:
    run_id: str
    run_name: str
    link: str


@dataclass(frozen=True)
class Recommendation:
    """The answer, or why there is none (``best`` empty)."""

    goal: Goal
    bounds: tuple[Bound, ...]
    considered: int
    excluded: dict[str, int]
    best: dict[str, str] = field(default_factory=dict)
    value: str = ""
    evidence: tuple[Evidence, ...] = ()
    runners_up: tuple[tuple[dict[str, str], str], ...] = ()
    separation: Separation | None = None  # is it a winner, or could the gap be noise?

    @property
    def found(self) -> bool:
        return bool(self.best)

    def sentence(self) -> str:
        """One line a person reads first: the winner, its figure, by how much and how sure
        (``pytorch with intra_op_threads=2: lowest train_time (train_time_seconds), 1.15
        (median of 4 runs, ...); a clear winner: 7% ahead of the next best, ...``)."""
        extreme = "lowest" if self.goal.direction == "minimize" else "highest"
        wanted = f"{extreme} {self.goal.text}"
        if self.goal.text != self.goal.metric:
            wanted += f" ({self.goal.metric})"
        if self.bounds:
            wanted += " with " + " and ".join(b.text for b in self.bounds)
        if not self.found:
            why = ", ".join(f"{n} by {k}" for k, n in self.excluded.items()) or "no runs"
            return (f"{wanted}: no configuration qualifies ({self.considered} considered; "
                    f"excluded: {why})")
        verdict = ""
        if self.separation:
            verdict = "; " + self.separation.text
            if self.runners_up:  # name it where the verdict speaks of it
                verdict = verdict.replace("the next best", f"the next best "
                                          f"({self.runner_up_names()[0][0]})", 1)
        return f"{self.winner()}: {wanted}, {self.value}{verdict}"

    def winner(self) -> str:
        """The best configuration by name: its system, then only the settings in which it
        differs from the next best, the one it is compared with (a farther runner-up, such
        as a one-run study trial at other epochs, names its own differences)."""
        next_best = self.runners_up[0][0] if self.runners_up else self.best
        differing = [f"{k}={v}" for k, v in self.best.items() if k != "system"
                     and next_best.get(k) != v]
        return _named(self.best.get("system", ""), differing) or "the only configuration"

    def runner_up_names(self) -> list[tuple[str, str]]:
        """Each runner-up as (its system and the settings in which it differs from the
        winner, its value): what a person needs to tell them apart."""
        return [(_named(settings.get("system", ""),
                        [f"{k}={v}" for k, v in settings.items()
                         if k != "system" and self.best.get(k) != v]) or "the same settings",
                 value) for settings, value in self.runners_up]


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
              tracking_uri: str = "", *, include_disturbed: bool = False) -> Recommendation:
    """Aggregate replicates, drop configurations whose medians break a bound, pick the best
    median, and say whether a rank test on the runs that may decide a winner (valid ones, or
    all with ``include_disturbed``) separates it from the next best."""
    keys = [f"metrics.{goal.metric}", *(f"metrics.{b.metric}" for b in bounds)]
    for key, what in zip(keys, ["objective", *(f"constraint {b.text!r}" for b in bounds)],
                         strict=True):
        refuse_accuracy_on_synthetic_data(rows, key.removeprefix("metrics."), what)
        if not rows.empty and key not in rows:
            raise ConfigError(f"no run logged {key.removeprefix('metrics.')!r} (the {what}); "
                              "check the name (see `mlflow-dlaas recommend --help`) or the "
                              "runs' entry point")
    stats = aggregate(rows, keys)
    candidates = stats[stats[f"{keys[0]}|median"].notna()] if len(stats) else stats
    excluded: dict[str, int] = {}
    if len(stats) > len(candidates):
        excluded[f"no {goal.metric}"] = len(stats) - len(candidates)
    for bound in bounds:
        median = candidates.get(f"metrics.{bound.metric}|median",
                                pd.Series(np.nan, index=candidates.index))
        keep = pd.Series([bool(np.isfinite(v)) and bound.holds(float(v)) for v in median],
                         index=candidates.index, dtype=bool)
        if (~keep).any():
            excluded[bound.text] = int((~keep).sum())
        candidates = candidates[keep]
    found = Recommendation(goal, bounds, len(stats), excluded)
    if candidates.empty:
        return found
    ranked = candidates.sort_values(f"{keys[0]}|median", kind="stable",
                                    ascending=goal.direction == "minimize")
    shown = shown_settings(stats)
    best = ranked.iloc[0]
    names = rows.set_index("run_id")["run_name"].to_dict()
    experiments = rows.set_index("run_id")["experiment_id"].to_dict()
    evidence = tuple(Evidence(r, str(names.get(r, "")), run_link(tracking_uri,
                                                                  experiments.get(r, "0"), r))
                     for r in best["run_ids"])
    return Recommendation(
        goal, bounds, len(stats), excluded, _settings(best, shown),
        _value(best, keys[0]), evidence,
        tuple((_settings(r, shown), _value(r, keys[0]))
              for _, r in ranked.iloc[1:1 + RUNNERS_UP].iterrows()),
        _separation(rows, ranked, keys[0], include_disturbed))


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


def _separation(rows: pd.DataFrame, ranked: pd.DataFrame, key: str,
                include_disturbed: bool) -> Separation:
    """The rank test's verdict on the best configuration's counted runs against the next
    best's."""
    configs = configuration_ids(rows)  # the labels ``aggregate`` gave the ranked rows
    counted = counts_toward_winner(rows, include_disturbed=include_disturbed)

    def values(config: str) -> list[float]:
        chosen = rows.loc[(configs == config) & counted, key]
        return pd.to_numeric(chosen, errors="coerce").dropna().tolist()

    next_best = values(ranked.iloc[1]["config"]) if len(ranked) > 1 else None
    return separate(values(ranked.iloc[0]["config"]), next_best,
                    counted_runs_label(include_disturbed=include_disturbed))


def run_link(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """The run's page: on its tracking server, or on `mlflow ui`'s default address."""
    base = "http://127.0.0.1:5000"
    if tracking_uri.startswith(("http://", "https://")):  # without any credentials in it
        scheme, rest = tracking_uri.split("://", 1)
        base = f"{scheme}://{rest.rsplit('@', 1)[-1]}".rstrip("/")
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}"


def _settings(row: pd.Series, shown: list[str]) -> dict[str, str]:
    return {c.removeprefix("params."): setting_cell(row, c) for c in shown}


def _value(row: pd.Series, key: str) -> str:
    median, n = row[f"{key}|median"], int(row[f"{key}|n"])
    if n > 1:
        return (f"{_number(median)} (median of {n} runs, IQR {_number(row[f'{key}|q1'])}–"
                f"{_number(row[f'{key}|q3'])})")
    return f"{_number(median)} (1 run)"


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
