"""``decide --budget``: rounds the sequential rule can decide in, or minutes."""

from __future__ import annotations

import pytest

from mlflow_dlaas.decide.command import Budget
from mlflow_dlaas.errors import ConfigError


def test_a_budget_is_rounds_or_minutes() -> None:
    assert Budget.parse(None) == Budget(12)
    assert Budget.parse("8") == Budget(8)
    assert Budget.parse("10m") == Budget(12, 10.0)


@pytest.mark.parametrize(("text", "said"), [
    ("5", "5 rounds can never decide at 0.05 (too few for any look); give a whole number of "
          "rounds, at least 6"),
    ("7.5", "give a whole number of rounds"),
    ("soon", "give rounds (e.g. 12) or minutes (e.g. 10m)"),
    ("0m", "give rounds"),
])
def test_a_budget_that_cannot_decide_or_be_read_is_refused(text: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said.replace("(", r"\(").replace(")", r"\)")):
        Budget.parse(text)
