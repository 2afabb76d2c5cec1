"""What ``mlflow-dlaas compare`` and ``mlflow-dlaas recommend`` do, below the CLI."""

from __future__ import annotations

import os
from pathlib import Path

import mlflow
from mlflow import MlflowClient

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.report.collect import RunTable, collect_runs
from mlflow_dlaas.report.goals import Bound, parse_bound, parse_goal
from mlflow_dlaas.report.publish import Written, default_output, log_report_run, write_report
from mlflow_dlaas.report.recommend import Recommendation, recommend
from mlflow_dlaas.report.report import Ask, Workloads, build_report
from mlflow_dlaas.tracking import configure_tracking, redact_uri


def compare(*, experiment: str | None, study: str | None, output: str | None,
            objectives: tuple[str, ...] = (), constraints: tuple[str, ...] = (),
            log_run: bool = True) -> tuple[Written, str | None]:
    """Collect, build, write and (unless ``log_run`` is false) log the report."""
    asks = _asks(objectives, constraints)
    client, uri = _client()
    table = collect_runs(client, experiment=experiment, study=study)
    report = build_report(client, table, redact_uri(uri), asks)
    written = write_report(report, Path(output) if output else default_output(table.scope))
    run_id = log_report_run(client, report, written, _home_experiment(table)) if log_run else None
    return written, run_id


def recommend_command(*, experiment: str | None, study: str | None, objective: str,
                      constraints: tuple[str, ...] = (), batch_size: int | None = None
                      ) -> Recommendation:
    """The best configuration for one objective under ``constraints``."""
    ((goal, bounds),) = _asks((objective,), constraints)
    client, uri = _client()
    work = Workloads.of(collect_runs(client, experiment=experiment, study=study))
    rows = work.rows_for(client, goal, bounds)
    if batch_size is not None:
        if "batch_size" not in rows:
            raise ConfigError(f"--batch-size applies to inference objectives; {goal.text!r} "
                              "is judged on training runs")
        rows = rows[rows["batch_size"] == batch_size]
    return recommend(rows, goal, bounds, redact_uri(uri))


def _asks(objectives: tuple[str, ...], constraints: tuple[str, ...]) -> list[Ask]:
    bounds: tuple[Bound, ...] = tuple(parse_bound(c) for c in constraints)
    if bounds and not objectives:
        raise ConfigError("--constraint needs an --objective to constrain")
    return [(parse_goal(o), bounds) for o in objectives]


def _client() -> tuple[MlflowClient, str]:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    configure_tracking()
    return MlflowClient(), mlflow.get_tracking_uri()


def _home_experiment(table: RunTable) -> str:
    """Where the report run goes: the experiment most of the compared runs are in."""
    if len(table.runs):
        return str(table.runs["experiment_id"].mode().iloc[0])
    return table.experiment_ids[0]
