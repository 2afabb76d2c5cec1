"""Write a report to disk and log it as the artifacts of a report run."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from mlflow import MlflowClient

from mlflow_dlaas.errors import ReportIncompleteError
from mlflow_dlaas.report.render_html import render_html
from mlflow_dlaas.report.render_markdown import render_markdown
from mlflow_dlaas.report.report import Report
from mlflow_dlaas.runs.schema import (
    ENTRY_TAG,
    RECOMMENDATION_TAG_PREFIX,
    REPORT_SCOPE_TAG,
    ROLE_TAG,
)
from mlflow_dlaas.store.ownership import owner_tags

ARTIFACT_DIR = "report"


@dataclass(frozen=True)
class Written:
    html: Path
    markdown: Path
    directory: Path
    files: tuple[Path, ...]  # everything this report wrote, nothing else in the directory
    #: one line per part that could not be built or written: ``"<part>: <why>"``
    failures: tuple[str, ...] = ()

    def raise_if_incomplete(self) -> None:
        """A :class:`ReportIncompleteError` naming every failed part, when any failed."""
        if self.failures:
            raise ReportIncompleteError(
                f"the report in {self.directory} is incomplete (every other part was "
                f"written): {'; '.join(self.failures)}")


def default_output(scope: str) -> Path:
    return Path("dlaas-reports") / re.sub(r"[^A-Za-z0-9_.-]+", "-", scope).strip("-")


def write_report(report: Report, directory: Path) -> Written:
    """``report.html`` (self-contained), ``report.md``, ``plots/*.png``, ``runs.csv`` and
    ``<table>_stats.csv`` (every statistic of every configuration).

    Each part is written on its own: one that fails is named in ``failures`` (with the
    report's own build failures) and the others are still written. Raises ``OSError`` only
    when ``directory`` itself cannot be made.
    """
    plots = directory / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    parts = _Parts(list(report.failures))
    for section in report.sections:
        for plot in section.plots:
            if plot.png is not None:
                parts.write(f"plot {plot.name}", plots / report.plot_file(section, plot),
                            lambda p=plot: p.png)
    html = directory / "report.html"
    parts.write("report.html", html, lambda: render_html(report).encode("utf-8"))
    markdown = directory / "report.md"
    parts.write("report.md", markdown, lambda: render_markdown(report).encode("utf-8"))
    parts.write("runs.csv", directory / "runs.csv", lambda: _csv(report.runs))
    stats: dict[str, list[pd.DataFrame]] = {}  # every statistic: median, q1, q3, mean, sd, n
    for table in (t for section in report.sections for t in section.tables):
        stats.setdefault(f"{table.title.split()[0].lower()}_stats.csv", []).append(
            table.stats_csv())
    for name, frames in stats.items():  # one file per kind; the host column tells hosts apart
        parts.write(name, directory / name,
                    lambda f=frames: _csv(pd.concat(f, ignore_index=True)))
    return Written(html, markdown, directory, tuple(parts.files), tuple(parts.failures))


class _Parts:
    """Writes the report's files one by one, keeping what failed and why."""

    def __init__(self, failures: list[str]) -> None:
        self.files: list[Path] = []
        self.failures = failures

    def write(self, part: str, path: Path, content: Callable[[], bytes | None]) -> None:
        try:
            data = content()
            if data is not None:
                path.write_bytes(data)
                self.files.append(path)
        except Exception as e:  # one part lost, never the whole report
            self.failures.append(f"{part}: {type(e).__name__}: {e}")


def _csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode("utf-8")


def log_report_run(client: MlflowClient, report: Report, written: Written,
                   experiment_id: str) -> str:
    """A FINISHED run tagged ``dlaas.entry=report`` holding the report's files."""
    tags = {ENTRY_TAG: "report", ROLE_TAG: "report", REPORT_SCOPE_TAG: report.scope,
            **owner_tags()}
    run = client.create_run(experiment_id, run_name=f"report-{report.scope}"[:250], tags=tags)
    try:
        for path in written.files:  # only this report's files, whatever else DIR holds
            folder = path.parent.relative_to(written.directory)
            client.log_artifact(run.info.run_id, str(path),
                                str(Path(ARTIFACT_DIR) / folder) if folder.parts else ARTIFACT_DIR)
        found = [(s, r) for s in report.sections for r in s.recommendations if r.found]
        for i, (section, rec) in enumerate(found):
            where = f"host {section.host}: " if report.split_by_host else ""
            where += f"{rec.workload}: " if rec.workload else ""
            client.set_tag(run.info.run_id, f"{RECOMMENDATION_TAG_PREFIX}{i}",
                           (where + rec.sentence())[:5000])
    except BaseException:
        client.set_terminated(run.info.run_id, "FAILED")
        raise
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id
