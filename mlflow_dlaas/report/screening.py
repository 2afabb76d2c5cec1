"""Which runs a comparison keeps and which may decide a winner, by their ``dlaas.validity``.

A run is ``valid``, ``disturbed`` (other processes or steal time took CPU while it measured)
or, when it carries no verdict (runs logged before the check existed), unverified.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from mlflow_dlaas.runs.validity import DISTURBED, VALID

UNVERIFIED = "unverified"
#: the flag that keeps disturbed runs, as the notes name it
INCLUDE_FLAG = "--include-disturbed"
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


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


def brief_reason(reason: str) -> str:
    """A reason with its figures left out, so that like reasons group together:
    "other processes used 0.9 of 2 cores during train" -> "other processes used … of …
    cores during train"."""
    return _NUMBER.sub("…", reason.strip()) or "no reason recorded"


@dataclass(frozen=True)
class Screened:
    """The runs a comparison keeps, and what it left out or kept unverified, and why."""

    kept: pd.DataFrame
    disturbed: int  # runs tagged disturbed: left out, or kept with include_disturbed
    include_disturbed: bool
    unverified: int
    reasons: dict[str, int] = field(default_factory=dict)  # brief reason -> disturbed runs
    examples: dict[str, str] = field(default_factory=dict)  # brief reason -> one in full

    def _why(self) -> str:
        """Each kind of reason with its count, and one in full (its figures)."""
        return "; ".join(
            f"{self.examples.get(reason, reason)}: {n}" if n == 1 else
            f"{reason}, e.g. {self.examples[reason]}: {n}" if reason in self.examples else
            f"{reason}: {n}" for reason, n in self.reasons.items())

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
    parts = [part.strip() for text in texts.fillna("").astype(str)
             for part in ([p for p in text.split(";") if p.strip()] or [""])]
    reasons = Counter(brief_reason(part) for part in parts)
    examples: dict[str, str] = {}
    for part in parts:
        if part:
            examples.setdefault(brief_reason(part), part)
    kept = runs if include_disturbed else runs[verdict != DISTURBED]
    return Screened(kept, len(disturbed), include_disturbed, int((verdict == UNVERIFIED).sum()),
                    dict(reasons.most_common()), examples)
