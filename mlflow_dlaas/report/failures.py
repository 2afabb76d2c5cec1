"""Runs that did not finish, counted against the configurations they tried: an answer counts
every run it had, so a configuration that failed in some of its runs says so, and one that
failed in all of them is named as tried."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from mlflow_dlaas.report.comparable import configuration_columns, row_keys, workload_ids
from mlflow_dlaas.report.formatting import setting_text

#: how much of a failure's reason an answer quotes
REASON_CHARACTERS = 160
#: the exception's type that opens a recorded reason (``ConfigError: ...``): not for readers
ERROR_TYPE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit): ")
#: columns a failed run cannot have: one row per batch size exists only for finished runs
PER_RESULT = ("batch_size",)


@dataclass(frozen=True)
class FailureCount:
    """One configuration's runs that did not finish, against all it had."""

    failed: int
    total: int
    reason: str  # the most frequent reason, shortened

    def text(self) -> str:
        """``failed in 1 of 2 runs (top-1 agreement 0.625 < 0.75)``."""
        why = f" ({self.reason})" if self.reason else ""
        if self.failed < self.total:
            return f"failed in {self.failed} of {self.total} runs{why}"
        return f"failed in all {self.total} runs{why}" if self.total > 1 else f"failed{why}"


def failed_like(rows: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of ``runs`` that FAILED and belong to one of the workloads in ``rows``: those
    an answer over ``rows`` must count (a KILLED run was stopped, by a person or a pruner:
    it says nothing about its configuration; nor does a trial's run that failed while the
    tracking server did not answer)."""
    if runs.empty or rows.empty or "status" not in runs:
        return runs.iloc[0:0]
    ended = runs[runs["status"] == "FAILED"]
    if "store_outage" in ended:  # failed while the tracking server was away: measured again
        ended = ended[ended["store_outage"].fillna("").astype(str) == ""]
    if ended.empty:
        return ended
    entries = set(rows["entry"]) if "entry" in rows else set()
    ended = ended[ended["entry"].isin(entries)] if entries else ended
    if ended.empty:
        return ended
    known = set(workload_ids(rows))
    return ended[workload_ids(_with_columns(ended, rows)).isin(known)]


def matching_columns(rows: pd.DataFrame) -> list[str]:
    """The configuration columns a failed run is matched on."""
    return [c for c in configuration_columns(rows) if c not in PER_RESULT]


def count_by_configuration(settings: pd.DataFrame, finished: Sequence[int],
                           failed: pd.DataFrame, columns: list[str]) -> list[FailureCount | None]:
    """Per row of ``settings`` (one configuration each, ``finished`` runs apiece), its failed
    runs' count and reason, or None where it has none."""
    if failed.empty:
        return [None] * len(settings)
    failed_keys = row_keys(_with_columns(failed, settings), columns)
    found: list[FailureCount | None] = []
    for key, runs in zip(row_keys(settings, columns), finished, strict=True):
        mine = failed[(failed_keys == key).to_numpy()]
        found.append(FailureCount(len(mine), len(mine) + int(runs), reason_of(mine))
                     if len(mine) else None)
    return found


def never_finished(settings: pd.DataFrame, failed: pd.DataFrame, columns: list[str]
                   ) -> list[str]:
    """Configurations that failed in every run (none finished), each in words:
    ``learning_rate=0.1: failed in all 6 runs (loss is NaN)``, named by the
    settings that vary among all the runs."""
    if failed.empty:
        return []
    failed = _with_columns(failed, settings)
    finished_keys = set(row_keys(settings, columns))
    keys = row_keys(failed, columns)
    everything = pd.concat([settings[columns], failed[columns]], ignore_index=True)
    varying = [c for c in columns if everything[c].fillna("").astype(str).nunique() > 1]
    lines = []
    for key in dict.fromkeys(keys):
        if key in finished_keys:
            continue
        mine = failed[(keys == key).to_numpy()]
        first = mine.iloc[0]
        name = ", ".join(f"{c.removeprefix('params.')}={setting_text(first[c])}"
                         for c in varying) or str(first.get("system", "")) or "a configuration"
        lines.append(f"{name}: {FailureCount(len(mine), len(mine), reason_of(mine)).text()}")
    return lines


def _with_columns(failed: pd.DataFrame, like: pd.DataFrame) -> pd.DataFrame:
    """``failed`` with every column of ``like`` it lacks (empty: never logged)."""
    missing = {c: "" for c in like.columns if c not in failed}
    return failed.assign(**missing) if missing else failed


def reason_of(failed: pd.DataFrame) -> str:
    """The most frequent last line of the runs' failure reasons (a traceback's error), without
    the exception's type, shortened."""
    if "failure_reason" not in failed:
        return ""
    reasons = failed["failure_reason"].fillna("").astype(str).str.strip()
    reasons = reasons[reasons != ""].map(
        lambda r: ERROR_TYPE.sub("", r.splitlines()[-1].strip(), count=1))
    if reasons.empty:
        return ""
    reason = str(reasons.mode().iloc[0])
    return reason if len(reason) <= REASON_CHARACTERS else \
        reason[:REASON_CHARACTERS - 1] + "…"
