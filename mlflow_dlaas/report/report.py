"""Build the comparison report from a run table: tables, plots, recommendations."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

import pandas as pd
from mlflow import MlflowClient

from mlflow_dlaas.report import (
    inference_plots,
    peak_plots,
    resource_plots,
    roofline,
    training_plots,
)
from mlflow_dlaas.report.across_hosts import WhichMachine, which_machine
from mlflow_dlaas.report.collect import RunTable
from mlflow_dlaas.report.cost import Prices
from mlflow_dlaas.report.derived import (
    PEAK_MEMORY,
    TREE_PEAK,
    add_energy,
    add_peak_memory,
    batched_metrics,
    inference_rows,
    tree_peak_fallbacks,
)
from mlflow_dlaas.report.hosts import UNKNOWN_HOST, Host, host_names, hosts
from mlflow_dlaas.report.libraries import PROJECT_MEASURES, PROJECT_TITLE, libraries_table
from mlflow_dlaas.report.plots import Plot
from mlflow_dlaas.report.precision import inference_precision_table, training_precision_table
from mlflow_dlaas.report.project_table import project_table
from mlflow_dlaas.report.questions import (
    Ask,
    Question,
    accuracy_checks,
    is_accuracy,
    questions,
)
from mlflow_dlaas.report.recommend import (
    Recommendation,
    add_time_to_accuracy,
    recommend_each_workload,
)
from mlflow_dlaas.report.screening import screen
from mlflow_dlaas.report.tables import (
    INFERENCE_COLUMNS,
    SCENARIO_COLUMNS,
    TRAINING_COLUMNS,
    ComparisonTable,
    comparison_table,
)
from mlflow_dlaas.runs.goals import Bound, Goal, parse_goal

T = TypeVar("T")


@dataclass(frozen=True)
class HostSection:
    """One host's tables, plots and recommendations: runs of two hosts are never pooled."""

    host: str
    cpu_model: str
    tables: list[ComparisonTable]
    plots: list[Plot]
    recommendations: list[Recommendation]  # one per question and workload
    #: one line per part that could not be built: ``"<part>: <why>"``
    failures: list[str] = field(default_factory=list)
    #: checks in place of questions (accuracy between thread settings), one line each
    checks: list[str] = field(default_factory=list)

    @property
    def heading(self) -> str:
        return f"Host {self.host}" + (f" · {self.cpu_model}" if self.cpu_model else "")

    def recommendations_by_workload(self) -> list[tuple[str, list[Recommendation]]]:
        """The answers grouped by workload, in the order first asked ('' for one workload)."""
        groups: dict[str, list[Recommendation]] = {}
        for answer in self.recommendations:
            groups.setdefault(answer.workload, []).append(answer)
        return list(groups.items())


@dataclass(frozen=True)
class Report:
    """Everything the HTML and Markdown renderings show."""

    scope: str
    generated_at: str
    tracking_uri: str
    status_counts: dict[str, int]
    sections: list[HostSection]  # one per host
    notes: list[str] = field(default_factory=list)
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: the hosts side by side, where there are several
    which_machine: WhichMachine | None = None

    @property
    def split_by_host(self) -> bool:
        return len(self.sections) > 1

    @property
    def failures(self) -> list[str]:
        """Every part that could not be built, host by host."""
        prefix = (lambda s: f"host {s.host}: ") if self.split_by_host else (lambda s: "")
        return [prefix(s) + failure for s in self.sections for failure in s.failures]

    def plot_file(self, section: HostSection, plot: Plot) -> str:
        """The plot's file name under ``plots/``, unique across hosts."""
        prefix = f"{section.host}_" if self.split_by_host else ""
        return f"{prefix}{plot.name}.png"


@dataclass(frozen=True)
class Workloads:
    """The finished runs split the way the report uses them."""

    all: pd.DataFrame  # one row per run
    train: pd.DataFrame
    inference: pd.DataFrame  # one row per (inference run, batch size)
    batched: frozenset[str]  # metric keys logged per batch size
    project: pd.DataFrame  # runs of a user's own MLflow Project
    #: runs that FAILED (any entry point), which the tables count beside the finished ones
    failed: pd.DataFrame = field(default_factory=pd.DataFrame)

    @classmethod
    def of(cls, finished: pd.DataFrame, failed: pd.DataFrame | None = None) -> Workloads:
        """From finished runs, with the derived metrics (peak memory, energy) added;
        ``failed``: the runs that FAILED on the same host."""
        if len(finished):
            finished = add_peak_memory(add_energy(finished))
        def entry(name: str) -> pd.DataFrame:
            return finished[finished["entry"] == name] if len(finished) else finished

        infer = entry("infer")
        return cls(finished, entry("train"), inference_rows(infer) if len(infer) else infer,
                   batched_metrics(infer), entry("project"),
                   pd.DataFrame() if failed is None else failed)

    def runs_of(self, entry: str) -> pd.DataFrame:
        """One row per finished run of the entry point ``entry`` (train, infer, project)."""
        return self.all[self.all["entry"] == entry] if len(self.all) else self.all

    def rows_for(self, client: MlflowClient, goal: Goal, bounds: tuple[Bound, ...] = ()
                 ) -> pd.DataFrame:
        """The rows an objective is judged on: per batch size when it or a bound is a metric
        logged per batch size (run-wide ones repeat on each row), else one per run of the
        entry points (train, infer ...) that logged it; per-epoch histories are read for
        ``time_to_accuracy@X``."""
        if goal.accuracy_target is not None:
            return add_time_to_accuracy(client, self.train, goal.accuracy_target, goal.metric)
        if {goal.metric, *(b.metric for b in bounds)} & self.batched:
            return self.inference
        key = f"metrics.{goal.metric}"
        if key not in self.all:
            return self.all
        entries = set(self.all.loc[self.all[key].notna(), "entry"])
        return self.all[self.all["entry"].isin(entries)]

    def can_answer(self, client: MlflowClient, goal: Goal) -> bool:
        rows = self.rows_for(client, goal)
        key = f"metrics.{goal.metric}"
        return key in rows and bool(rows[key].notna().any())


def build_report(client: MlflowClient, table: RunTable, tracking_uri: str,
                 asks: list[Ask] | None = None, *, include_disturbed: bool = False,
                 prices: Prices | None = None) -> Report:
    """Tables, plots and recommendations, per host, for the finished runs of ``table`` that
    are not disturbed (all of them with ``include_disturbed``): each study's own
    objectives over its runs, the user's ``asks``, then the standing questions."""
    screened = screen(table.finished, include_disturbed=include_disturbed)
    found = hosts(screened.kept)
    sections = [_section(client, host, tracking_uri, table.study_asks(), asks or [],
                         include_disturbed, table.failed) for host in found]
    parts = _Guarded()
    machines = parts.build("which machine", lambda: which_machine(
        client, {s.host: s.recommendations for s in sections},
        {h.name: h.runs for h in found}, prices))
    return Report(table.scope, dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                  tracking_uri, table.status_counts, sections,
                  _notes(table, screened.kept, len(sections)) + screened.notes()
                  + [f"Could not be built: {f}" for f in parts.failures], table.runs, machines)


def _training_table(work: Workloads) -> ComparisonTable | None:
    return comparison_table("Training", work.train, TRAINING_COLUMNS) if len(work.train) else None


def _inference_table(work: Workloads) -> ComparisonTable | None:
    if not len(work.inference):
        return None
    return comparison_table("Inference (per batch size)", work.inference, INFERENCE_COLUMNS)


def _scenario_table(work: Workloads) -> ComparisonTable | None:
    """Server and multi-stream, measured once per run: where any inference run has them."""
    runs = work.all[work.all["entry"] == "infer"] if len(work.all) else work.all
    measured = tuple(c for c in SCENARIO_COLUMNS if c.key in runs and runs[c.key].notna().any())
    if not measured:
        return None
    return comparison_table("Scenarios per run: server and multi-stream", runs, measured)


#: Every table a section can hold, in the report's order: (part name, builder). Each builder
#: gives its table, or None where the runs call for none.
TABLE_BUILDERS: tuple[tuple[str, Callable[[Workloads], ComparisonTable | None]], ...] = (
    ("Training table", _training_table),
    ("Parallel libraries table", lambda work: libraries_table(work.train, failed=work.failed)),
    ("Precision in training table",
     lambda work: training_precision_table(work.train, work.failed)),
    ("Inference table", _inference_table),
    ("Precision in inference table",
     lambda work: inference_precision_table(work.inference, work.failed)),
    ("Scenarios table", _scenario_table),
    ("Project table", lambda work: project_table(work.project)),
    ("Project parallel libraries table",
     lambda work: libraries_table(work.project, PROJECT_MEASURES, PROJECT_TITLE)),
)
#: Every plot, in the report's order: (part name, the entry points whose runs it draws
#: (any: every run), builder of the plot or its missing reason). A plot whose runs the
#: section has none of is not listed at all (a project study's report shows no training
#: curves "not drawn").
TRAIN, INFER, ANY = ("train",), ("infer",), ()
PLOT_BUILDERS: tuple[tuple[str, tuple[str, ...],
                           Callable[[MlflowClient, Workloads], Plot]], ...] = (
    ("time_to_accuracy_curves", TRAIN,
     lambda client, work: training_plots.time_to_accuracy_curves(client, work.train)),
    ("accuracy_vs_time", TRAIN, lambda client, work: training_plots.accuracy_vs_time(work.train)),
    ("fraction_of_peak", TRAIN + INFER,
     lambda client, work: peak_plots.fraction_of_peak(work.train, work.runs_of("infer"))),
    ("roofline", INFER, lambda client, work: roofline.roofline(work.runs_of("infer"))),
    ("versus_batch_size", INFER,
     lambda client, work: inference_plots.versus_batch_size(work.inference)),
    ("versus_threads", INFER, lambda client, work: inference_plots.versus_threads(work.inference)),
    ("latency_cdfs", INFER,
     lambda client, work: inference_plots.latency_cdfs(client, work.inference)),
    ("versus_offered_load", INFER,
     lambda client, work: inference_plots.versus_offered_load(client, work.inference)),
    ("timelines", ANY, lambda client, work: resource_plots.timelines(client, work.all)),
    ("correlation_heatmap", ANY,
     lambda client, work: resource_plots.correlation_heatmap(work.all)),
    ("energy_vs_throughput", TRAIN + INFER,
     lambda client, work: resource_plots.energy_vs_throughput(work.train, work.inference)),
)


def _on_host(failed: pd.DataFrame, host: str) -> pd.DataFrame:
    """The failed runs of ``host`` (and those that failed before they could say theirs)."""
    if failed.empty or "host" not in failed:
        return failed
    named = host_names(failed)
    return failed[(named == host) | (named == UNKNOWN_HOST)]


def _section(client: MlflowClient, host: Host, tracking_uri: str,
             study_asks: dict[str, list[Ask]], asks: list[Ask], include_disturbed: bool,
             failed: pd.DataFrame) -> HostSection:
    work = Workloads.of(host.runs, _on_host(failed, host.name))
    parts = _Guarded()
    tables = [t for name, build in TABLE_BUILDERS
              if (t := parts.build(name, lambda b=build: b(work))) is not None]
    plots = [p for name, entries, build in PLOT_BUILDERS
             if not entries or any(len(work.runs_of(e)) for e in entries)
             if (p := parts.build(f"plot {name}", lambda b=build: b(client, work))) is not None]
    recommendations, checks = answer_questions(client, work, study_asks, asks, tracking_uri,
                                               include_disturbed, failed, parts)
    return HostSection(host.name, host.cpu_model, tables, plots, recommendations,
                       parts.failures, checks)


def answer_questions(client: MlflowClient, work: Workloads, study_asks: dict[str, list[Ask]],
                     asks: list[Ask], tracking_uri: str, include_disturbed: bool,
                     failed: pd.DataFrame, parts: _Guarded | None = None
                     ) -> tuple[list[Recommendation], list[str]]:
    """Every question's answers over one host's runs (``work``), and the checks that stand
    in for some; a question whose answer cannot be built is named in ``parts``' failures."""
    parts = parts or _Guarded()
    recommendations: list[Recommendation] = []
    checks: list[str] = []
    for question in questions(study_asks, asks, default_asks(client, work)):
        found = parts.build(f"recommendation {question.goal.text}", lambda q=question: _answer(
            client, work, q, tracking_uri, include_disturbed, failed))
        if found is not None:
            recommendations += found[0]
            checks += found[1]
    return recommendations, checks


def _answer(client: MlflowClient, work: Workloads, question: Question, tracking_uri: str,
            include_disturbed: bool, failed: pd.DataFrame
            ) -> tuple[list[Recommendation], list[str]]:
    """The question's answers, one per workload of the runs it is asked of, and the checks
    that stand in for an accuracy question where accuracy cannot differ by design."""
    goal, bounds = question.goal, question.bounds
    rows = question.rows(work.rows_for(client, goal, bounds))
    if rows.empty:
        return [], []
    checks: list[str] = []
    if is_accuracy(goal):
        asked, found = accuracy_checks(goal, rows)
        checks = [f"study {question.study} · {c}" if question.study else c for c in found]
        rows = pd.concat([w.rows for w in asked]) if asked else rows.iloc[0:0]
        if rows.empty:
            return [], checks
    answers = recommend_each_workload(rows, goal, bounds, tracking_uri,
                                      include_disturbed=include_disturbed, failed=failed)
    return [replace(a, workload=question.label(a.workload)) for a in answers], checks


class _Guarded:
    """Builds the report's parts one by one: a part that fails is left out and named, with
    why, never the end of the whole report."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def build(self, part: str, builder: Callable[[], T]) -> T | None:
        try:
            return builder()
        except Exception as e:  # one part lost, never the whole report
            self.failures.append(f"{part}: {type(e).__name__}: {e}")
            return None


DEFAULT_QUESTIONS = ("accuracy", "time_to_accuracy", "train_time", "p99_latency",
                     "inference_throughput", "energy_per_1000_predictions")


def default_asks(client: MlflowClient, work: Workloads) -> list[Ask]:
    """The questions every report answers, those the runs logged the metric for."""
    goals = [parse_goal(q) for q in DEFAULT_QUESTIONS]
    return [(goal, ()) for goal in goals if work.can_answer(client, goal)]


def _notes(table: RunTable, kept: pd.DataFrame, host_count: int) -> list[str]:
    notes = []
    unfinished = {k: v for k, v in table.status_counts.items() if k != "FINISHED"}
    if unfinished:
        notes.append("Not in the tables (only finished runs are): "
                     + ", ".join(f"{n} {s.lower()}" for s, n in sorted(unfinished.items())))
    notes += [f"Skipped unmeasured on the machine that ran study {study!r} (not in the "
              f"tables): {text}" for study, text in sorted(table.skipped.items())]
    if table.runs.empty:
        notes.append(f"No runs in {table.scope}: run `mlflow run projects/<framework> ...` or "
                     "`mlflow-dlaas study SPEC.yaml` first.")
    if len(kept) and (other := (~kept["entry"].isin(["train", "infer", "project"])).sum()):
        notes.append(f"{other} finished runs are neither training nor inference runs "
                     "(e.g. `mlflow-dlaas monitor`): they appear in the resource plots only.")
    if host_count > 1:
        notes.append(f"Runs from {host_count} hosts (hardware fingerprints): each has its "
                     "own tables, plots and recommendations; runs of different hosts are "
                     "never pooled.")
    fallbacks = tree_peak_fallbacks(kept)
    if fallbacks:
        notes.append(f"Peak memory of {fallbacks} runs is their whole process tree's "
                     f"(`{TREE_PEAK}`, harness included): they have no `{PEAK_MEMORY}`, "
                     "the framework's own peak.")
    return notes
