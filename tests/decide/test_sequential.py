"""The sequential rule: a look after every round, and the whole procedure's rate of false
"different" verdicts at or below 5 %, by simulation (2,000 synthetic studies per case)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from mlflow_dlaas.sequential import Decision, SequentialRule

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from sequential_rule import simulate  # noqa: E402

STUDIES = 2000
#: the simulation's own 95 % margin around a 5 % rate over 2,000 studies
MARGIN = 1.96 * math.sqrt(0.05 * 0.95 / STUDIES)


def test_the_default_budget_looks_where_a_look_can_decide() -> None:
    rule = SequentialRule()
    assert rule.looks == (8, 9, 10, 11, 12) and rule.level == pytest.approx(0.01)
    assert 2 / 2 ** 8 < rule.level <= 2 / 2 ** 7  # round 7 could never reach it
    assert SequentialRule(max_rounds=5).looks == ()
    assert "can never decide" in SequentialRule(max_rounds=5).describe()


@pytest.mark.parametrize("cv", [0.01, 0.05, 0.20])
def test_equal_configurations_are_decided_different_at_most_5_percent(cv: float) -> None:
    found = simulate(SequentialRule(), 1.0, cv, STUDIES, seed=11)
    assert found["different"] <= 0.05 + MARGIN


def test_a_true_10_percent_effect_at_5_percent_cv_is_decided_correctly() -> None:
    found = simulate(SequentialRule(), 0.9, 0.05, STUDIES, seed=12)
    assert found["correct"] >= 0.80


def test_an_open_comparison_says_how_many_more_rounds_would_decide() -> None:
    rng = np.random.default_rng(3)
    log_b = rng.normal(0, 0.3, (1, 12))
    (judged,) = SequentialRule().judge(log_b + math.log(0.93) + rng.normal(0, 0.3, (1, 12)),
                                       log_b)
    assert judged.decision is Decision.OPEN and judged.rounds == 12
    assert judged.more_rounds >= 1
    (early,) = SequentialRule().judge(np.log([[1.0] * 8]), np.log([[1.3] * 8]))
    assert early.decision is Decision.A_LOWER and early.rounds == 8
    assert early.ratio == pytest.approx(1 / 1.3)
    (too_soon,) = SequentialRule().judge(np.log([[1.0] * 7]), np.log([[1.3] * 7]))
    assert too_soon.decision is Decision.OPEN and too_soon.more_rounds == 1
