"""The report as a Markdown summary; plots are the PNG files written beside it."""

from __future__ import annotations

from mlflow_dlaas.report.report import Report


def render_markdown(report: Report, plot_dir: str = "plots") -> str:
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(report.status_counts.items()))
    lines = [f"# Framework comparison: {report.scope}", "",
             f"Generated {report.generated_at} from `{report.tracking_uri}`; runs: "
             f"{counts or 'none'}. Cells are medians over replicates [interquartile range].", ""]
    lines += [f"> {note}" for note in report.notes]
    if report.recommendations:
        lines += ["", "## Recommendations", ""]
        for rec in report.recommendations:
            lines.append(f"- **{rec.sentence()}**")
            if rec.evidence:
                lines.append("  evidence: " + ", ".join(
                    f"[{e.run_name or e.run_id}]({e.link})" for e in rec.evidence))
    for table in report.tables:
        lines += ["", f"## {table.title}", "",
                  "| " + " | ".join(table.headings) + " |",
                  "|" + "---|" * len(table.headings)]
        lines += ["| " + " | ".join(row) + " |" for row in table.cells]
        lines += [""] + [f"- missing: {m}" for m in table.missing]
    lines += ["", "## Plots", ""]
    for plot in report.plots:
        if plot.png is None:
            lines.append(f"- {plot.title}: not drawn, {plot.missing}")
        else:
            lines.append(f"![{plot.title}]({plot_dir}/{plot.name}.png)")
    return "\n".join(lines) + "\n"
