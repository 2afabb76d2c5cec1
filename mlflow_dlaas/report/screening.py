"""Which runs a comparison keeps and which may decide a winner, by their ``dlaas.validity``.

A run is ``valid``, ``disturbed`` (other processes or steal time took CPU while it measured)
or, when it carries no verdict (runs logged before the check existed), unverified.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from mlflow_dlaas.runs.validity import DISTURBED, VALID

UNVERIFIED = "unverified"
#: the flag that keeps disturbed runs, as the notes name it
INCLUDE_FLAG = "--include-disturbed"


def validity_of(runs: pd.DataFrame) -> pd.Series:
    """Per run: ``valid``, ``disturbed`` or ``unverified`` (no or an unknown verdict)."""
    raw = runs["validity"] if "validity" in runs else pd.Series("", index=runs.index)
    return raw.where(raw.isin([VALID, DISTURBED]), UNVERIFIED)


def counts_toward_winner(runs: pd.DataFrame, *, include_disturbed: bool) -> pd.Series:
    """Per run: whether it may decide a winner; valid runs only, every run when the user
    asked to include disturbed ones."""
    if include_disturbed:
        return pd.Series(True, index=runs.index)
    return validity_of(runs) == VALID


def counted_runs_label(*, include_disturbed: bool) -> str:
    """How the runs that decide a winner are called in a verdict."""
    return "runs of any validity" if include_disturbed else "valid runs"


#: each kind of disturbance a validity reason names: its pattern, and how a range of its
#: figures is said (``{low}``, ``{high}`` and the pattern's other groups)
KINDS = (
    (re.compile(r"other processes used (?P<v>[\d.]+) of (?P<cores>\d+) cores during "
                r"(?P<phase>[\w/.-]+) \(limit (?P<limit>[\d.]+)\)"),
     "other processes used {figure} of {cores} cores (limit {limit})"),
    (re.compile(r"the hypervisor stole (?P<v>[\d.]+) % of the CPU during (?P<phase>[\w/.-]+)"),
     "the hypervisor stole {figure} % of the CPU"),
    (re.compile(r"memory pressure reached (?P<v>[\d.]+) % during (?P<phase>[\w/.-]+)"),
     "memory pressure reached {figure} %"),
)


@dataclass(frozen=True)
class Disturbance:
    """One kind of disturbance over the runs it hit: in words, with its figures' range."""

    text: str  # "other processes used 0.31–1.50 of 2 cores (limit 0.25)"
    phases: tuple[str, ...]
    runs: int  # runs it hit (a run hit by two kinds counts under each)

    def said(self, total: int) -> str:
        """``in all 8: other processes used ... during train, offline`` (or ``in 2 of 8``)."""
        where = f" during {', '.join(self.phases)}" if self.phases else ""
        share = (f"in all {total}" if self.runs == total and total > 1 else
                 "" if total == 1 else f"in {self.runs} of {total}")
        return f"{share + ': ' if share else ''}{self.text}{where}"


def disturbances(reasons: Sequence[str]) -> list[Disturbance]:
    """The kinds of disturbance in the disturbed runs' reasons (one reason per run, its
    parts separated by ``;``), each with the number of runs it hit."""
    found: dict[str, tuple[str, list[float], dict[str, None], set[int], dict[str, str]]] = {}
    for run, reason in enumerate(reasons):
        parts = [p.strip() for p in str(reason).split(";") if p.strip()]
        for part in parts or ["no reason recorded"]:
            kind = next(((template, m) for pattern, template in KINDS
                         if (m := pattern.fullmatch(part))), None)
            if kind is None:
                entry = found.setdefault(part, (part, [], {}, set(), {}))
                entry[3].add(run)
                continue
            template, match = kind
            groups = {k: v for k, v in match.groupdict().items() if k not in ("v", "phase")}
            key = template.format(figure="", **groups)
            entry = found.setdefault(key, (template, [], {}, set(), groups))
            entry[1].append(float(match["v"]))
            entry[2][match["phase"]] = None
            entry[3].add(run)
    return [Disturbance(_range_text(template, figures, groups), tuple(phases), len(runs))
            for template, figures, phases, runs, groups in found.values()]


def _range_text(template: str, figures: list[float], groups: dict[str, str]) -> str:
    if not figures:
        return template
    low, high = min(figures), max(figures)
    figure = f"{low:.2f}" if low == high else f"{low:.2f}–{high:.2f}"
    return template.format(figure=figure, **groups)


@dataclass(frozen=True)
class Screened:
    """The runs a comparison keeps, and what it left out or kept unverified, and why."""

    kept: pd.DataFrame
    disturbed: int  # runs tagged disturbed: left out, or kept with include_disturbed
    include_disturbed: bool
    unverified: int
    kinds: tuple[Disturbance, ...] = ()  # what disturbed them, in full words

    def _why(self) -> str:
        """Each kind of disturbance, with the runs it hit out of the disturbed ones."""
        return "; ".join(kind.said(self.disturbed) for kind in self.kinds) or \
            "no reason recorded"

    def notes(self) -> list[str]:
        """Sentences for the report and ``recommend``'s output."""
        notes = []
        why = self._why()
        if self.disturbed and not self.include_disturbed:
            notes.append(f"Left out: {_runs(self.disturbed, 'disturbed')} ({why}). Add "
                         f"{INCLUDE_FLAG} to keep them.")
        elif self.disturbed:
            notes.append(f"Kept with {INCLUDE_FLAG}: "
                         f"{_runs(self.disturbed, 'disturbed')} ({why}); they count toward a "
                         "winner.")
        if self.unverified:
            counted = ("they count toward a winner with " + INCLUDE_FLAG
                       if self.include_disturbed else "they do not count toward a winner")
            notes.append(f"No validity verdict on {_runs(self.unverified)} (logged before "
                         f"mlflow-dlaas checked for other load): kept in the tables; {counted}.")
        return notes


    def nothing_kept(self) -> str | None:
        """Why there is nothing to compare, where every run was left out; else None."""
        if len(self.kept) or not self.disturbed or self.include_disturbed:
            return None
        why = self._why()
        return (f"nothing to compare: all {_runs(self.disturbed, 'finished')} were disturbed "
                f"by other work on this machine ({why}) and left out; add {INCLUDE_FLAG} to "
                "compare them anyway, or measure again on a quiet machine")


def _runs(n: int, kind: str = "") -> str:
    return f"{n} {kind + ' ' if kind else ''}run{'' if n == 1 else 's'}"


def screen(runs: pd.DataFrame, *, include_disturbed: bool) -> Screened:
    """Leave out the disturbed runs, unless ``include_disturbed``; count the reasons."""
    verdict = validity_of(runs)
    disturbed = runs[verdict == DISTURBED]
    texts = (disturbed["validity_reason"] if "validity_reason" in disturbed
             else pd.Series("", index=disturbed.index))
    kept = runs if include_disturbed else runs[verdict != DISTURBED]
    return Screened(kept, len(disturbed), include_disturbed, int((verdict == UNVERIFIED).sum()),
                    tuple(disturbances(list(texts.fillna("").astype(str)))))
