"""Write a report to disk and log it as the artifacts of a report run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from mlflow import MlflowClient

from mlflow_dlaas.ownership import owner_tags
from mlflow_dlaas.report.render_html import render_html
from mlflow_dlaas.report.render_markdown import render_markdown
from mlflow_dlaas.report.report import Report

ARTIFACT_DIR = "report"


@dataclass(frozen=True)
class Written:
    html: Path
    markdown: Path
    directory: Path
    files: tuple[Path, ...]  # everything this report wrote, nothing else in the directory


def default_output(scope: str) -> Path:
    return Path("dlaas-reports") / re.sub(r"[^A-Za-z0-9_.-]+", "-", scope).strip("-")


def write_report(report: Report, directory: Path) -> Written:
    """``report.html`` (self-contained), ``report.md``, ``plots/*.png``, ``runs.csv`` and
    ``<table>_stats.csv`` (every statistic of every configuration)."""
    plots = directory / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    files = []
    for section in report.sections:
        for plot in section.plots:
            if plot.png is not None:
                files.append(plots / report.plot_file(section, plot))
                files[-1].write_bytes(plot.png)
    html = directory / "report.html"
    html.write_text(render_html(report), encoding="utf-8")
    markdown = directory / "report.md"
    markdown.write_text(render_markdown(report), encoding="utf-8")
    report.runs.to_csv(directory / "runs.csv", index=False)
    files += [html, markdown, directory / "runs.csv"]
    stats: dict[str, list[pd.DataFrame]] = {}  # every statistic: median, q1, q3, mean, sd, n
    for table in (t for section in report.sections for t in section.tables):
        stats.setdefault(f"{table.title.split()[0].lower()}_stats.csv", []).append(table.stats)
    for name, frames in stats.items():  # one file per kind; the host column tells hosts apart
        frame = pd.concat(frames, ignore_index=True)
        frame.assign(run_ids=frame["run_ids"].str.join(",")).to_csv(directory / name,
                                                                    index=False)
        files.append(directory / name)
    return Written(html, markdown, directory, tuple(files))


def log_report_run(client: MlflowClient, report: Report, written: Written,
                   experiment_id: str) -> str:
    """A FINISHED run tagged ``dlaas.entry=report`` holding the report's files."""
    tags = {"dlaas.entry": "report", "dlaas.role": "report", "dlaas.report_scope": report.scope,
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
            client.set_tag(run.info.run_id, f"dlaas.recommendation.{i}",
                           (where + rec.sentence())[:5000])
    except BaseException:
        client.set_terminated(run.info.run_id, "FAILED")
        raise
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id
