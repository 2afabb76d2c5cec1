"""Where an answer is open between whole configurations, what is decided setting by setting.

A grid study's leader may not be told from the next best (two 2-thread cells that differ in
the allocator) while one of its settings is plainly better (2 threads against 1). Each
setting that varies among the compared configurations is judged on its own: the leader's
value against each other value, matched cell by cell with every other setting held fixed
(:func:`mlflow_dlaas.report.comparable.match`, a stratified test). A setting is decided for
the leader's value where each other value is decided worse; the others are named as not yet
told apart.

Where every setting is decided so, each of its ``m`` comparisons at ``5 % / m`` (Bonferroni:
the chance that any of them is a false "better" stays at or below 5 %), the whole recipe is
decided setting by setting: the answer then counts as decided, although the leading cell and
the next are not told apart as whole configurations (:func:`recipe_decided`). That reading
holds each setting's effect to be of one sign across the cells it was matched in, which the
matched test pools over (the cells are named in the answer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from mlflow_dlaas.decidable import ALPHA
from mlflow_dlaas.report.comparable import match
from mlflow_dlaas.report.effect import Effect, Verdict
from mlflow_dlaas.report.formatting import setting_text


@dataclass(frozen=True)
class SettingVerdict:
    """The leader's value of one setting against each other value it was measured at."""

    setting: str  # without "params."
    value: str  # the leader's, as logged
    against: tuple[tuple[str, Effect], ...]  # (other value, leader's value against it)

    @property
    def decided(self) -> bool:
        """Whether the leader's value beats every other value, each decided."""
        return bool(self.against) and all(e.verdict is Verdict.BETTER for _, e in self.against)

    def text(self) -> str:
        """``intra_op_threads=2 (better than 1: ratio 0.661, 95 % CI 0.620–0.700, matched
        within 4 cells)``."""
        parts = [f"than {setting_text(other)}: ratio {effect.ratio:.3g}, 95 % CI "
                 f"{effect.low:.3g}–{effect.high:.3g}, {effect.design}"
                 for other, effect in self.against]
        return f"{self.setting}={setting_text(self.value)} (better {'; '.join(parts)})"


def by_setting(rows: pd.DataFrame, leader: Mapping[str, str], columns: Sequence[str],
               metric: str, *, lower_is_better: bool) -> list[SettingVerdict]:
    """Per setting in ``columns`` (``params.X``) that takes several values in ``rows`` (the
    counted runs of the compared configurations), the leader's value (``leader``: column ->
    logged value) against each other value, cell by cell."""
    verdicts = []
    for column in columns:
        if column not in rows or column not in leader:
            continue
        values = rows[column].where(rows[column].notna(), "").astype(str)
        others = sorted(set(values) - {leader[column]})
        if not others:
            continue
        against = []
        for other in others:
            matching = match(rows, column, [leader[column]], [other])
            if matching.cells:
                against.append((other, matching.effect(metric, lower_is_better=lower_is_better)))
        verdicts.append(SettingVerdict(column.removeprefix("params."), leader[column],
                                       tuple(against)))
    return verdicts


def recipe_decided(verdicts: Sequence[SettingVerdict]) -> bool:
    """Whether every setting is decided for the leader's value, each of the ``m``
    comparisons behind them at ``ALPHA / m`` (Bonferroni over the settings' comparisons)."""
    effects = [e for v in verdicts for _, e in v.against]
    level = ALPHA / max(len(effects), 1)
    return bool(verdicts) and all(v.decided for v in verdicts) and all(
        e.p_value is not None and e.p_value < level for e in effects)


def decided_in_part(verdicts: Sequence[SettingVerdict]) -> str:
    """``decided setting by setting: intra_op_threads=2 (better than 1: ...); not yet told
    apart: allocator, openmp_runtime``; '' where no setting is decided."""
    decided = [v for v in verdicts if v.decided]
    if not decided:
        return ""
    rest = [v.setting for v in verdicts if not v.decided]
    if recipe_decided(verdicts):
        comparisons = sum(len(v.against) for v in verdicts)
        return (f"the whole recipe is decided setting by setting (each of its {comparisons} "
                f"comparisons at {ALPHA:g}/{comparisons}, matched with the other settings "
                "held fixed): " + "; ".join(v.text() for v in decided))
    return ("decided setting by setting, each matched with the others held fixed: "
            + "; ".join(v.text() for v in decided)
            + (f"; not yet told apart: {', '.join(rest)}" if rest else ""))
