"""The claims report: one row per claim with its verdict, then per claim what was measured
(a table of rank tests and a plot of their effects) and the evidence runs. HTML (one
self-contained file) and Markdown, logged as a report run like ``compare``'s."""

from __future__ import annotations

import base64
import datetime as dt
import math
from dataclasses import dataclass
from html import escape
from pathlib import Path

from matplotlib.figure import Figure
from mlflow import MlflowClient

from mlflow_dlaas.report.effect import ALPHA, MIN_EFFECT, MIN_REPLICATES
from mlflow_dlaas.report.plots import Plot, draw, log_scale, missing
from mlflow_dlaas.report.publish import ARTIFACT_DIR
from mlflow_dlaas.report.render_html import STYLE
from mlflow_dlaas.reproduce.claim_parts import MEMORY, SATURATION_GAIN, Comparison
from mlflow_dlaas.reproduce.runner import ClaimResult
from mlflow_dlaas.runs.schema import CLAIM_TAG_PREFIX, ENTRY_TAG, REPORT_SCOPE_TAG, ROLE_TAG
from mlflow_dlaas.runs.ui_links import run_url
from mlflow_dlaas.store.ownership import owner_tags

#: evidence links shown per claim in the summary table (all are in the claim's section)
SUMMARY_LINKS = 6
VALID_ONLY = ("Only finished runs tagged valid (no other load or steal time during their "
              "measured phases) of this host count; disturbed and unverified runs, and runs "
              "of other hosts, are left out and counted in each claim's notes.")
ANY_VALIDITY = ("Finished runs of this host of any validity count (--include-disturbed): "
                "disturbed runs, whose measured phases shared the CPU with other processes, "
                "decide verdicts too; each claim's notes count them. Runs of other hosts are "
                "left out.")
RULES = (
    f"Each comparison sets the runs of two settings against each other, equal in every other "
    f"setting (mlflow_dlaas/report/comparable.py), and states the ratio of their geometric "
    f"means with its 95 % interval: the ratios an exact permutation test on the logarithms "
    f"does not reject at p < {ALPHA} (mlflow_dlaas/report/effect.py). It needs at least "
    f"{MIN_REPLICATES} counted runs a side, and enough arrangements that p < {ALPHA} can be "
    f"reached (4 runs a side are the fewest).",
    f"A part of a claim holds when its comparisons separate the settings in the claimed "
    f"direction: the interval excludes 1 and the ratio lies beyond the {MIN_EFFECT:.0%} "
    f"minimum effect; it does not hold when a comparison separates them the other way (or "
    f"another runtime or setting is separated ahead); it is no meaningful difference when the "
    f"intervals lie within the minimum effect; otherwise it is not separable (too few runs, "
    f"or an interval that spans the minimum effect). Ratios read a over b.",
    "A claim holds when every part holds, does not hold when any part does not, is no "
    "meaningful difference when its open parts all are, and is not separable otherwise.",
    f"Throughput saturates when it grows up to batch 32 (separated) and by less than "
    f"{(SATURATION_GAIN - 1) * 100:.0f} % (median ratio) from batch 64 to the largest batch.",
    f"Energy against throughput: Spearman's rank correlation, p < {ALPHA}.",
    "Not measurable here: the machine lacks what the claim needs (a framework, a library, "
    "an energy counter, a GPU), said with the reason; nothing runs for it.",
)


@dataclass(frozen=True)
class ClaimsReport:
    """Everything both renderings show."""

    plan: str
    host: str
    tracking_uri: str
    results: list[ClaimResult]
    plots: dict[int, Plot]
    generated_at: str
    include_disturbed: bool = False

    @property
    def rules(self) -> tuple[str, ...]:
        return (ANY_VALIDITY if self.include_disturbed else VALID_ONLY, *RULES)

    @property
    def title(self) -> str:
        return f"The papers' findings, re-measured on host {self.host} ({self.plan} plan)"


def build(plan: str, host: str, tracking_uri: str, results: list[ClaimResult],
          include_disturbed: bool = False) -> ClaimsReport:
    """The report, with one effect plot per claim that has tests."""
    return ClaimsReport(plan, host, tracking_uri, results,
                        {r.claim.number: effect_plot(r) for r in results},
                        dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                        include_disturbed)


def effect_plot(result: ClaimResult) -> Plot:
    """Each test's ratio of medians, on a log axis: solid where the test separated."""
    name, title = f"claim{result.claim.number}", f"Claim {result.claim.number}: effects measured"
    tests = [c for p in result.verdict.parts for c in p.comparisons
             if not math.isnan(c.ratio) and c.ratio > 0][:16]
    if not tests:
        return missing(name, title, result.verdict.reason)

    def paint(figure: Figure) -> None:
        axes = figure.add_subplot()
        labels = [c.what for c in tests][::-1]
        ratios = [c.ratio for c in tests][::-1]
        colours = ["#2a7" if c.separated else "#bbb" for c in tests][::-1]
        axes.barh(range(len(tests)), [r - 1 for r in ratios], left=1, color=colours)
        axes.set_yticks(range(len(tests)), labels, fontsize=7)
        axes.axvline(1, color="#333", linewidth=0.8)
        log_scale(axes, "x")
        axes.set_xlabel("median of the first setting / median of the second (log)")

    return draw(name, title, "Green: separated by the rank test; grey: not separable.", paint,
                size=(8.0, 1.2 + 0.32 * len(tests)))


def write(report: ClaimsReport, directory: Path) -> list[Path]:
    """``claims.html``, ``claims.md`` and ``plots/claimN.png``; the paths written."""
    plots = directory / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    files = []
    for plot in report.plots.values():
        if plot.png is not None:
            files.append(plots / f"{plot.name}.png")
            files[-1].write_bytes(plot.png)
    html, markdown = directory / "claims.html", directory / "claims.md"
    html.write_text(render_html(report), encoding="utf-8")
    markdown.write_text(render_markdown(report), encoding="utf-8")
    return [html, markdown, *files]


def log_run(client: MlflowClient, report: ClaimsReport, files: list[Path], directory: Path,
            experiment_id: str) -> str:
    """A FINISHED report run holding the files, each verdict as a ``dlaas.claim.N`` tag."""
    tags = {ENTRY_TAG: "report", ROLE_TAG: "report",
            REPORT_SCOPE_TAG: f"reproduce {report.plan}", **owner_tags()}
    run = client.create_run(experiment_id, run_name=f"reproduce-{report.plan}", tags=tags)
    try:
        for path in files:
            folder = path.parent.relative_to(directory)
            client.log_artifact(run.info.run_id, str(path),
                                str(Path(ARTIFACT_DIR) / folder) if folder.parts else ARTIFACT_DIR)
        for result in report.results:
            client.set_tag(run.info.run_id, f"{CLAIM_TAG_PREFIX}{result.claim.number}",
                           f"{result.verdict.verdict}: {result.verdict.reason}"[:5000])
    except BaseException:
        client.set_terminated(run.info.run_id, "FAILED")
        raise
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def _links(result: ClaimResult) -> list[tuple[str, str]]:
    return [(run_id[:8], run_url(result.experiment_id, run_id))
            for run_id in result.verdict.run_ids]


def _spread(values: tuple[float, ...], metric: str) -> str:
    """``median [q1–q3]``, memory in MB."""
    if not values:
        return "—"
    unit = " MB" if metric == MEMORY else ""
    return _quartiles(sorted(values)) + unit


def _quartiles(ordered: list[float]) -> str:
    middle = _number(_quantile(ordered, 0.5))
    if len(ordered) == 1:
        return middle
    return (f"{middle} [{_number(_quantile(ordered, 0.25))}–"
            f"{_number(_quantile(ordered, 0.75))}]")


def _number(value: float) -> str:
    """Four significant digits; whole thousands with separators (12,030, not 1.203e+04)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation, as pandas' default."""
    at = (len(ordered) - 1) * q
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def _test_rows(result: ClaimResult) -> list[tuple[str, str, Comparison]]:
    return [(part.text, part.outcome, c) for part in result.verdict.parts
            for c in part.comparisons]


def _slug(verdict: str) -> str:
    return verdict.replace(" ", "-")


# --- HTML ----------------------------------------------------------------------------------

VERDICT_STYLE = """
.holds { background: #e3f4e3; } .does-not-hold { background: #fbe3e3; }
.not-separable, .no-meaningful-difference { background: #fbf3e6; } .not-measurable-here
{ background: #eee; color: #555; } td, th { text-align: left; vertical-align: top; }
"""


def render_html(report: ClaimsReport) -> str:
    """The whole page: summary table, rules, then one section per claim."""
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
             f"<title>{escape(report.title)}</title>",
             f"<style>{STYLE}{VERDICT_STYLE}</style></head><body>",
             f"<h1>{escape(report.title)}</h1>",
             f"<p>Generated {escape(report.generated_at)} from <code>"
             f"{escape(report.tracking_uri)}</code>.</p>",
             "<h2>Claims</h2><div class='scroll'><table class='claims'><thead><tr>"
             "<th>#</th><th>claim</th><th>paper</th><th>verdict</th><th>measured here</th>"
             "<th>evidence runs</th></tr></thead><tbody>"]
    for r in report.results:
        links = _links(r)
        shown = ", ".join(f"<a href='{escape(u)}'>{escape(t)}</a>"
                          for t, u in links[:SUMMARY_LINKS])
        if len(links) > SUMMARY_LINKS:
            shown += f" and <a href='#claim-{r.claim.number}'>{len(links) - SUMMARY_LINKS} more</a>"
        parts.append(
            f"<tr class='claim' data-claim='{r.claim.number}'>"
            f"<td><a href='#claim-{r.claim.number}'>{r.claim.number}</a></td>"
            f"<td>{escape(r.claim.text)}</td><td>{escape(r.claim.paper.split(',')[0])}</td>"
            f"<td class='verdict {_slug(r.verdict.verdict)}'>{escape(r.verdict.verdict)}</td>"
            f"<td>{escape(r.verdict.reason)}</td><td>{shown or '—'}</td></tr>")
    parts.append("</tbody></table></div><h2>How a verdict is decided</h2><ul>")
    parts += [f"<li>{escape(rule)}</li>" for rule in report.rules]
    parts.append("</ul>")
    for r in report.results:
        parts += _claim_html(r, report.plots[r.claim.number])
    parts.append("</body></html>")
    return "\n".join(parts)


def _claim_html(r: ClaimResult, plot: Plot) -> list[str]:
    c = r.claim
    parts = [f"<h2 id='claim-{c.number}'>Claim {c.number}: "
             f"<span class='verdict {_slug(r.verdict.verdict)}'>{escape(r.verdict.verdict)}"
             "</span></h2>",
             f"<p><b>{escape(c.text)}</b></p>",
             f"<p>{escape(c.paper)}; {escape(c.section)}.</p>"]
    if c.decided:
        parts.append(f"<p>Decided by: {escape(c.decided)}</p>")
    if r.study:
        parts.append(f"<p>Study <code>{escape(r.study)}</code>: {r.valid_runs} runs of this "
                     "host counted.</p>")
    parts.append(f"<p>Verdict: {escape(r.verdict.reason)}</p>")
    parts += [f"<p class='missing'>{escape(n)}</p>" for n in r.notes]
    rows = _test_rows(r)
    if rows:
        parts.append("<div class='scroll'><table class='tests'><thead><tr><th>part</th>"
                     "<th>part's outcome</th><th>test</th><th>first setting</th><th>second setting"
                     "</th><th>ratio</th><th>rank test</th></tr></thead><tbody>")
        parts += [f"<tr><td>{escape(text)}</td><td class='{_slug(outcome)}'>{escape(outcome)}"
                  f"</td><td>{escape(t.what)}</td><td>{escape(_spread(t.a, t.metric))}</td>"
                  f"<td>{escape(_spread(t.b, t.metric))}</td><td>{t.ratio:.3g}</td>"
                  f"<td>{escape(t.outcome())}</td></tr>" for text, outcome, t in rows]
        parts.append("</tbody></table></div>")
    if plot.png is not None:
        data = base64.b64encode(plot.png).decode()
        parts.append(f"<figure><img alt='{escape(plot.title)}' src='data:image/png;base64,"
                     f"{data}'><figcaption>{escape(plot.caption)}</figcaption></figure>")
    links = _links(r)
    if links:
        parts.append("<p>Evidence runs: " + ", ".join(
            f"<a href='{escape(u)}'>{escape(t)}</a>" for t, u in links) + "</p>")
    return parts


# --- Markdown ------------------------------------------------------------------------------

def render_markdown(report: ClaimsReport) -> str:
    """The summary table, the rules, and per claim its tests and evidence runs."""
    lines = [f"# {report.title}", "",
             f"Generated {report.generated_at} from `{report.tracking_uri}`.", "",
             "| # | claim | verdict | measured here | evidence runs |", "|---|---|---|---|---|"]
    for r in report.results:
        links = _links(r)
        shown = ", ".join(f"[{t}]({u})" for t, u in links[:SUMMARY_LINKS])
        if len(links) > SUMMARY_LINKS:
            shown += f" and {len(links) - SUMMARY_LINKS} more"
        lines.append(f"| {r.claim.number} | {_cell(r.claim.text)} | **{r.verdict.verdict}** | "
                     f"{_cell(r.verdict.reason)} | {shown or '—'} |")
    lines += ["", "## How a verdict is decided", ""] + [f"- {rule}" for rule in report.rules]
    for r in report.results:
        c = r.claim
        lines += ["", f"## Claim {c.number}: {r.verdict.verdict}", "", c.text, "",
                  f"{c.paper}; {c.section}.", ""]
        if c.decided:
            lines += [f"Decided by: {c.decided}", ""]
        if r.study:
            lines += [f"Study `{r.study}`: {r.valid_runs} runs of this host counted.", ""]
        lines += [f"Verdict: {r.verdict.reason}", ""] + [f"> {n}" for n in r.notes]
        rows = _test_rows(r)
        if rows:
            lines += ["", "| part | part's outcome | test | first | second | ratio | rank test |",
                      "|---|---|---|---|---|---|---|"]
            lines += [f"| {_cell(text)} | {outcome} | {_cell(t.what)} | "
                      f"{_spread(t.a, t.metric)} | {_spread(t.b, t.metric)} | {t.ratio:.3g} | "
                      f"{t.outcome()} |"
                      for text, outcome, t in rows]
        plot = report.plots[c.number]
        if plot.png is not None:
            lines += ["", f"![{plot.title}](plots/{plot.name}.png)"]
        links = _links(r)
        if links:
            lines += ["", "Evidence runs: " + ", ".join(f"[{t}]({u})" for t, u in links)]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
