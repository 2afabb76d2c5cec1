"""What ``mlflow-dlaas compare`` and ``mlflow-dlaas recommend`` do, below the CLI."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import mlflow
from mlflow import MlflowClient

from mlflow_dlaas.errors import ConfigError, NothingToCompareError
from mlflow_dlaas.redaction import redact_uri
from mlflow_dlaas.report.collect import RunTable, collect_runs
from mlflow_dlaas.report.cost import Prices
from mlflow_dlaas.report.hosts import pick_host
from mlflow_dlaas.report.publish import Written, default_output, log_report_run, write_report
from mlflow_dlaas.report.recommend import Recommendation, recommend_each_workload
from mlflow_dlaas.report.report import Ask, Workloads, build_report
from mlflow_dlaas.report.screening import screen
from mlflow_dlaas.runs.goals import parse_asks
from mlflow_dlaas.store.tracking import configure_tracking


@dataclass(frozen=True)
class Answer:
    """``recommend``'s answers on one host, one per workload, and what a reader must know
    to trust them."""

    recommendations: tuple[Recommendation, ...]
    host: str | None  # the host judged; None when there were no runs
    notes: tuple[str, ...]  # runs left out and why, which host and why


def compare(*, experiment: str | None, study: str | None, output: str | None,
            objectives: tuple[str, ...] = (), constraints: tuple[str, ...] = (),
            log_run: bool = True, include_disturbed: bool = False,
            prices: Prices | None = None) -> tuple[Written, str | None]:
    """Collect, build, write and (unless ``log_run`` is false) log the report; raise
    :class:`NothingToCompareError` where there is no finished run, or every one was left
    out as disturbed (nothing is written or logged then)."""
    asks: list[Ask] = parse_asks(objectives, constraints)
    client, uri = _client()
    table = collect_runs(client, experiment=experiment, study=study)
    refuse_nothing_to_compare(table)
    nothing = screen(table.finished, include_disturbed=include_disturbed).nothing_kept()
    if nothing is not None:
        raise NothingToCompareError(nothing)
    report = build_report(client, table, redact_uri(uri), asks,
                          include_disturbed=include_disturbed, prices=prices)
    directory = Path(output) if output else default_output(table.scope)
    try:
        written = write_report(report, directory)
    except OSError as e:
        raise ConfigError(f"cannot write the report to {directory}: {e.strerror or e}; give "
                          "--output a folder you can write to") from None
    run_id = log_report_run(client, report, written, _home_experiment(table)) if log_run else None
    return written, run_id


def refuse_nothing_to_compare(table: RunTable) -> None:
    """One contract for every command that compares (``compare``, ``recommend``): no finished
    measured run is exit 1 with one line, and nothing written or logged."""
    if table.finished.empty:
        raise NothingToCompareError(
            f"nothing to compare: {table.scope} holds no finished measured run; run a "
            "workload or a study into it first (mlflow run projects/<framework> ..., "
            "mlflow-dlaas study SPEC)")


def recommend_command(*, experiment: str | None, study: str | None, objective: str,
                      constraints: tuple[str, ...] = (), batch_size: int | None = None,
                      host: str | None = None, include_disturbed: bool = False) -> Answer:
    """The best configuration for one objective under ``constraints``, on one host (``host``,
    else the one with the most valid runs), disturbed runs left out unless
    ``include_disturbed``."""
    ((goal, bounds),) = parse_asks((objective,), constraints)
    client, uri = _client()
    table = collect_runs(client, experiment=experiment, study=study)
    refuse_nothing_to_compare(table)
    screened = screen(table.finished, include_disturbed=include_disturbed)
    chosen, host_notes = pick_host(screened.kept, host)
    work = Workloads.of(chosen.runs if chosen else screened.kept)
    rows = work.rows_for(client, goal, bounds)
    if batch_size is not None:
        if "batch_size" not in rows:
            raise ConfigError(f"--batch-size applies to inference objectives; {goal.text!r} "
                              "is judged on training runs")
        rows = rows[rows["batch_size"] == batch_size]
    answers = recommend_each_workload(rows, goal, bounds, redact_uri(uri),
                                      include_disturbed=include_disturbed,
                                      failed=table.failed)
    return Answer(tuple(answers), chosen.name if chosen else None,
                  (*host_notes, *screened.notes()))


def _client() -> tuple[MlflowClient, str]:
    """The store the runs are read from; said only where the command's answer needs it (a
    report names its files and its report run; a refusal is one line)."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    configure_tracking(say_where=False)
    return MlflowClient(), mlflow.get_tracking_uri()


def _home_experiment(table: RunTable) -> str:
    """Where the report run goes: the experiment most of the compared runs are in."""
    if len(table.runs):
        return str(table.runs["experiment_id"].mode().iloc[0])
    return table.experiment_ids[0]
