"""The report as one self-contained HTML file: inline CSS, plots as data URIs."""

from __future__ import annotations

import base64
from html import escape

from mlflow_dlaas.report.across_hosts import WhichMachine
from mlflow_dlaas.report.plots import Plot
from mlflow_dlaas.report.recommend import Recommendation, decided_line
from mlflow_dlaas.report.report import HostSection, Report
from mlflow_dlaas.report.tables import ComparisonTable

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6rem; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .85rem; }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; text-align: right; }
th { background: #f0f3f7; } td:first-child, th:first-child { text-align: left; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: .85rem; color: #555; } .missing { color: #8a5a00; }
.answer { padding: .5rem .8rem; margin: .6rem 0; border-left: 4px solid #999; background: #f5f5f5; }
.answer.winner, .answer.settings { background: #eef7ee; border-left-color: #3a3; }
.answer.tie, .answer.only { background: #eef2f8; border-left-color: #57a; }
.answer.open, .answer.part { background: #f7f7f2; border-left-color: #aa8; }
.answer.none { background: #fbf3e6; border-left-color: #c80; }
.check { font-size: .9rem; color: #345; }
.answer .verdict { font-size: .75rem; text-transform: uppercase; letter-spacing: .05em;
  color: #555; margin: 0; } .answer .test { font-size: .8rem; color: #555; }
code { font-size: .85rem; }
.scroll { overflow-x: auto; }
"""


#: the label over a recommendation card, by its verdict
VERDICT_LABELS = {"winner": "a clear winner", "tie": "no meaningful difference",
                  "open": "not separable: no winner yet",
                  "part": "no winner yet; some settings decided one by one",
                  "settings": "decided setting by setting",
                  "only": "the only candidate",
                  "none": "no configuration qualifies"}


def render_html(report: Report) -> str:
    """The whole page."""
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(report.status_counts.items()))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>mlflow-dlaas report: {escape(report.scope)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Framework comparison: {escape(report.scope)}</h1>",
        f"<p>Generated {escape(report.generated_at)} from <code>"
        f"{escape(report.tracking_uri)}</code>; runs: {escape(counts or 'none')}. Cells are "
        "medians over replicates with the interquartile range in brackets.</p>",
    ]
    parts += [f"<p class='missing'>{escape(note)}</p>" for note in report.notes]
    parts += [f"<p class='missing failed'>Could not be built: {escape(failure)}</p>"
              for failure in report.failures]
    if report.which_machine is not None:
        parts += _which_machine(report.which_machine)
    for section in report.sections:
        parts += _section(report, section)
    parts.append("</body></html>")
    return "\n".join(parts)


def _which_machine(machines: WhichMachine) -> list[str]:
    """The hosts side by side, before each host's own part: a card per question."""
    parts = ["<h2 id='which-machine'>Which machine</h2>",
             "<p>Each host's own best configuration; hosts are compared, never pooled.</p>"]
    for answer in machines.answers:
        verdict = answer.effect.verdict.value if answer.effect is not None else "one host"
        style = "winner" if answer.effect is not None and answer.effect.verdict.decided \
            else "open"
        hosts = "".join(f"<li>{escape(line)}</li>" for line in answer.lines())
        test = (f"<p class='test'>{escape(answer.effect.test_text())}</p>"
                if answer.effect is not None else "")
        parts.append(f"<div class='answer {style}'><p class='verdict'>{escape(verdict)}</p>"
                     f"<p>{escape(answer.question)}</p><p><b>{escape(answer.sentence())}</b>"
                     f"</p><ul>{hosts}</ul>{test}</div>")
    if not machines.answers:
        parts.append("<p class='missing'>No question was answered on two hosts.</p>")
    parts += [f"<p class='check'>{escape(check)}</p>" for check in machines.checks]
    if machines.prices:
        parts.append(f"<p class='check'>Costs at the hosts' prices per hour: "
                     f"{escape(machines.prices)}.</p>")
    if machines.differences:
        parts.append("<h3>How the hosts differ</h3><ul>" + "".join(
            f"<li>{escape(d)}</li>" for d in machines.differences) + "</ul>")
    return parts


def _section(report: Report, section: HostSection) -> list[str]:
    """One host's part: under a heading of its own when the report spans several hosts."""
    level, parts = 2, []
    if report.split_by_host:
        level = 3
        parts.append(f"<h2 id='host-{escape(section.host)}'>{escape(section.heading)}</h2>")
    if decided_line(section.recommendations):
        parts.append(f"<p class='decided'>{escape(decided_line(section.recommendations))}</p>")
    for workload, answers in section.recommendations_by_workload():
        title = f"Recommendations: {workload}" if workload else "Recommendations"
        parts.append(f"<h{level}>{escape(title)}</h{level}>")
        parts += [_recommendation(r) for r in answers if r.compares]
        parts += [f"<p class='missing'>{escape(r.sentence())}</p>" for r in answers
                  if not r.compares]  # a question no run can answer is a note, not a card
    parts += [f"<p class='check'>{escape(check)}</p>" for check in section.checks]
    parts += [_table(t, level) for t in section.tables]
    parts.append(f"<h{level}>Plots</h{level}>")
    parts += [_plot(p, report.plot_file(section, p), level + 1) for p in section.plots]
    return parts


def _recommendation(rec: Recommendation) -> str:
    """A card styled by its verdict: a winner, a tie, an open question or no answer."""
    label = escape(VERDICT_LABELS[rec.verdict])
    html = (f"<div class='answer {rec.verdict}'><p class='verdict'>{label}</p>"
            f"<p><b>{escape(rec.sentence())}</b></p>")
    if rec.in_part:  # what the user can act on already, on a line of its own
        html += f"<p class='part'>{escape(rec.in_part[0].upper() + rec.in_part[1:])}</p>"
    if rec.test_text():
        html += f"<p class='test'>{escape(rec.test_text())}</p>"
    if rec.evidence:
        links = ", ".join(f"<a href='{escape(e.link)}'>{escape(e.run_name or e.run_id)}</a>"
                          for e in rec.evidence)
        html += f"<p>Evidence runs: {links}</p>"
    if rec.runners_up:
        html += "<p>Next best: " + "; ".join(
            escape(f"{name}: {value}") for name, value in rec.runner_up_names()) + "</p>"
    if rec.never_finished:
        html += "<p>Tried, never finished: " + "; ".join(
            escape(line) for line in rec.never_finished) + "</p>"
    return html + "</div>"


def _table(table: ComparisonTable, level: int) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in table.headings)
    body = "".join(
        "<tr>" + "".join(f"<td title='{escape(h)}'>{escape(c)}</td>" if h
                         else f"<td>{escape(c)}</td>" for c, h in zip(row, hints, strict=True))
        + "</tr>" for row, hints in zip(table.cells, table.hints, strict=True))
    missing = "".join(f"<li>{escape(m)}</li>" for m in table.missing)
    shared = ", ".join(f"{k}={v}" for k, v in table.shared)
    return (f"<h{level}>{escape(table.title)}</h{level}><div class='scroll'>"
            "<table class='comparison'>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
            + (f"<details class='shared'><summary>Same in every row ({len(table.shared)} "
               f"settings)</summary><p>{escape(shared)}</p></details>" if shared else "")
            + (f"<ul class='missing'>{missing}</ul>" if missing else ""))


def _plot(plot: Plot, file: str, level: int) -> str:
    if plot.png is None:
        return (f"<h{level}>{escape(plot.title)}</h{level}><p class='missing'>Not drawn: "
                f"{escape(plot.missing or '')}</p>")
    data = base64.b64encode(plot.png).decode()
    return (f"<figure id='{escape(file.removesuffix('.png'))}'>"
            f"<h{level}>{escape(plot.title)}</h{level}>"
            f"<img alt='{escape(plot.title)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{escape(plot.caption)}</figcaption></figure>")
