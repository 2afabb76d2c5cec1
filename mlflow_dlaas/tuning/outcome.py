"""How a study ended, in one line: what its trials came to, and why none completed."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from optuna.trial import FrozenTrial, TrialState

from mlflow_dlaas.errors import DlaasError
from mlflow_dlaas.tuning.recovery import REASON_ATTR, counts

#: How much of a failure reason names its kind in the count.
REASON_CHARS = 80


class NoTrialCompletedError(DlaasError):
    """Every trial of the study failed or was pruned: there is no result to report."""


def no_completion_reason(trials: Sequence[FrozenTrial]) -> str | None:
    """``0 of 4 trials completed: 3 failed (ConfigError: ...), 1 pruned`` when the study has
    trials but none completed (trials given up for a retry left out); else None."""
    counted = [t for t in trials if counts(t)]
    if not counted or any(t.state == TrialState.COMPLETE for t in counted):
        return None
    failed = [t for t in counted if t.state == TrialState.FAIL]
    pruned = sum(t.state == TrialState.PRUNED for t in counted)
    parts = []
    if failed:
        reasons = collections.Counter(_short(t.user_attrs.get(REASON_ATTR, "")) for t in failed)
        listed = "; ".join(reason if n == 1 else f"{n}x {reason}"
                           for reason, n in reasons.most_common())
        parts.append(f"{len(failed)} failed ({listed})")
    if pruned:
        parts.append(f"{pruned} pruned")
    return f"0 of {len(counted)} trials completed: {', '.join(parts)}"


def _short(reason: str) -> str:
    """The first line of a failure reason, cut to :data:`REASON_CHARS`."""
    line = (reason.strip().splitlines() or ["no reason recorded"])[0]
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."
