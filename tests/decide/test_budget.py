"""``decide --budget``: rounds the sequential rule can decide in, or minutes."""

from __future__ import annotations

import time

import pytest

from mlflow_dlaas.decide.command import time_for_a_round
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.sequential import Budget


def test_a_budget_is_rounds_or_minutes() -> None:
    assert Budget.parse(None) == Budget(12)
    assert Budget.parse("8") == Budget(8)
    assert Budget.parse("10m") == Budget(12, 10.0)


def test_a_round_after_the_first_starts_only_where_it_ends_within_the_minutes() -> None:
    minute, now = Budget(12, 1.0), time.monotonic()
    assert time_for_a_round(minute, now, 0, 500.0)  # the first always runs
    assert time_for_a_round(minute, now - 30, 1, 25.0)  # 30 s spent, 25 s more: in time
    assert not time_for_a_round(minute, now - 30, 1, 35.0)  # would end at 65 s
    assert time_for_a_round(Budget(12), now - 3600, 5, 600.0)  # rounds only: no clock


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


SPEC = """
name: t
frameworks: [pytorch]
fixed: {{epochs: 1}}
search_space: {{intra_op_threads: [1, 2]}}
objectives: [{{metric: train_time, direction: minimize}}]
sampler: grid
replicates: 4
decide: {decide}
"""


def test_a_study_spec_may_ask_for_decide_after_the_study(tmp_path) -> None:  # noqa: ANN001
    from mlflow_dlaas.tuning.plan import plan_study
    from mlflow_dlaas.tuning.spec import load_spec

    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(decide="{budget: 10m, seed: 3}"))
    spec = load_spec(str(path))
    assert spec.decide == Budget(12, 10.0) and spec.decide_seed == 3
    assert "decide: after the study, up to 12 rounds, at most 10 min of the configurations " \
        "behind its open answers" in "\n".join(plan_study(spec).lines())
    for bad, said in (("{budget: 3}", "decide.budget: --budget 3: 3 rounds can never decide"),
                      ("{rounds: 8}", "decide: give {budget: 12}"),
                      ("{budget: 8, seed: -1}", "decide.seed: must be a whole number")):
        path.write_text(SPEC.format(decide=bad))
        with pytest.raises(ConfigError, match=said.replace("{", r"\{")):
            load_spec(str(path))
