"""The report as a Markdown summary; plots are the PNG files written beside it."""

from __future__ import annotations

from mlflow_dlaas.report.across_hosts import WhichMachine
from mlflow_dlaas.report.recommend import decided_line
from mlflow_dlaas.report.report import HostSection, Report


def render_markdown(report: Report, plot_dir: str = "plots") -> str:
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(report.status_counts.items()))
    lines = [f"# Framework comparison: {report.scope}", "",
             f"Generated {report.generated_at} from `{report.tracking_uri}`; runs: "
             f"{counts or 'none'}. Cells are medians over replicates [interquartile range].", ""]
    for note in report.notes:
        lines += [f"> {note}", ""]
    for failure in report.failures:
        lines += [f"> Could not be built: {failure}", ""]
    if report.which_machine is not None:
        lines += _which_machine(report.which_machine)
    for section in report.sections:
        lines += _section(report, section, plot_dir)
    return "\n".join(lines) + "\n"


def _which_machine(machines: WhichMachine) -> list[str]:
    """The hosts side by side, before each host's own part."""
    lines = ["## Which machine", "",
             "Each host's own best configuration; hosts are compared, never pooled.", ""]
    for answer in machines.answers:
        lines.append(f"- **{answer.question}: {answer.sentence()}**")
        lines += [f"  - {line}" for line in answer.lines()]
        if answer.effect is not None and answer.effect.test_text():
            lines.append(f"  - test: {answer.effect.test_text()}")
    if not machines.answers:
        lines.append("- No question was answered on two hosts.")
    lines += [f"- {check}" for check in machines.checks]
    if machines.prices:
        lines += ["", f"Costs at the hosts' prices per hour: {machines.prices}."]
    if machines.differences:
        lines += ["", "How the hosts differ:", ""] + [f"- {d}" for d in machines.differences]
    return lines + [""]


def _section(report: Report, section: HostSection, plot_dir: str) -> list[str]:
    """One host's part: under a heading of its own when the report spans several hosts."""
    level, lines = "##", []
    if report.split_by_host:
        level = "###"
        lines += ["", f"## {section.heading}"]
    if decided_line(section.recommendations):
        lines += ["", f"_{decided_line(section.recommendations)}_"]
    for workload, answers in section.recommendations_by_workload():
        title = f"Recommendations: {workload}" if workload else "Recommendations"
        lines += ["", f"{level} {title}", ""]
        for rec in answers:
            if not rec.compares:  # a question no run can answer is a note, not an answer
                lines.append(f"- {rec.sentence()}")
                continue
            lines.append(f"- **{rec.sentence()}**")
            if rec.in_part:
                lines.append(f"  {rec.in_part}")
            if rec.test_text():
                lines.append(f"  test: {rec.test_text()}")
            if rec.evidence:
                lines.append("  evidence: " + ", ".join(
                    f"[{e.run_name or e.run_id}]({e.link})" for e in rec.evidence))
            if rec.runners_up:
                lines.append("  next best: " + "; ".join(
                    f"{name}: {value}" for name, value in rec.runner_up_names()))
            if rec.never_finished:
                lines.append("  tried, never finished: " + "; ".join(rec.never_finished))
    if section.checks:
        lines += [""] + [f"- {check}" for check in section.checks]
    for table in section.tables:
        lines += ["", f"{level} {table.title}", "",
                  _table_row(table.headings),
                  "|" + "---|" * len(table.headings)]
        lines += [_table_row(row) for row in table.cells]
        lines += [""] + [f"- missing: {m}" for m in table.missing]
        if table.shared:
            lines.append("- same in every row: " + ", ".join(f"{k}={v}" for k, v in table.shared))
    lines += ["", f"{level} Plots", ""]
    for plot in section.plots:
        if plot.png is None:
            lines.append(f"- {plot.title}: not drawn, {plot.missing}")
        else:
            lines.append(f"![{plot.title}]({plot_dir}/{report.plot_file(section, plot)})")
    return lines


def _table_row(cells: list[str]) -> str:
    """One Markdown table row; a ``|`` inside a cell escaped (``max |ref|``)."""
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
