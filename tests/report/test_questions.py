"""Which questions a report asks: a study's own objectives once, and accuracy as a check
between settings that cannot change it."""

from __future__ import annotations

import pandas as pd

from mlflow_dlaas.report.questions import accuracy_checks, questions
from mlflow_dlaas.runs.goals import parse_bound, parse_goal

ACCURACY = "metrics.Headline/test_accuracy"


def test_a_studys_objective_is_asked_once_over_its_runs_and_not_again_as_standing() -> None:
    study = {"threads": [(parse_goal("min:Headline/train_time_seconds"),
                          (parse_bound("peak_memory<=2GiB"),))]}
    standing = [(parse_goal(q), ()) for q in ("accuracy", "train_time", "p99_latency")]
    asked = questions(study, [], standing)
    assert [(q.study, q.goal.text) for q in asked] == [
        ("threads", "train_time"), ("", "accuracy"), ("", "train_time"), ("", "p99_latency")]
    rows = pd.DataFrame({"study": ["threads", "", "threads"], "run_id": ["a", "b", "c"]})
    assert list(asked[0].rows(rows)["run_id"]) == ["a", "c"]
    # the standing train_time question: of the runs outside the study that asked it only
    assert list(asked[2].rows(rows)["run_id"]) == ["b"]
    assert list(asked[1].rows(rows)["run_id"]) == ["a", "b", "c"]
    users = questions(study, [(parse_goal("train_time"), ())], standing)
    assert [(q.study, q.goal.text) for q in users] == [
        ("threads", "train_time"), ("", "train_time"), ("", "accuracy"), ("", "p99_latency")]
    assert asked[0].label("train · lenet5") == "study threads · train · lenet5"


def _runs(settings: dict[str, list[str]], accuracy: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(len(accuracy))], "entry": "train",
                         "system": "pytorch", "host": "h", "params.model": "lenet5",
                         **{f"params.{k}": v for k, v in settings.items()},
                         "params.seed": [str(i % 2) for i in range(len(accuracy))],
                         ACCURACY: accuracy})


def test_time_to_accuracy_is_a_time_not_an_accuracy() -> None:
    from mlflow_dlaas.report.questions import is_accuracy

    assert is_accuracy(parse_goal("accuracy"))
    assert not is_accuracy(parse_goal("time_to_accuracy"))
    assert not is_accuracy(parse_goal("time_to_accuracy@0.9"))


def test_accuracy_between_thread_settings_is_a_check_not_a_question() -> None:
    """At 1 thread, accuracy depends only on the seed (0.884 for seed 0, 0.890 for seed 1 in
    every cell): naming a cell "highest accuracy" would name noise."""
    rows = _runs({"allocator": ["default"] * 4 + ["jemalloc"] * 4,
                  "intra_op_threads": ["1", "1", "2", "2"] * 2}, [0.884, 0.890] * 4)
    asked, checks = accuracy_checks(parse_goal("accuracy"), rows)
    assert asked == []
    assert len(checks) == 1 and "allocator, intra_op_threads do not change what is " \
        "computed" in checks[0] and "4 configurations' median accuracies lie within " \
        "0.887–0.887" in checks[0] and "look at" not in checks[0]
    drifted = _runs({"allocator": ["default"] * 2 + ["jemalloc"] * 2}, [0.88, 0.88, 0.5, 0.5])
    assert "more than 0.01 apart: look at their runs" in accuracy_checks(
        parse_goal("accuracy"), drifted)[1][0]


def test_accuracy_between_learning_rates_or_frameworks_is_a_question() -> None:
    for settings in ({"learning_rate": ["0.01", "0.01", "0.1", "0.1"]},
                     {"precision": ["fp32", "fp32", "bf16", "bf16"]},
                     {"intra_op_threads": ["1", "1", "2", "2"],
                      "learning_rate": ["0.01", "0.01", "0.1", "0.1"]}):
        asked, checks = accuracy_checks(parse_goal("accuracy"),
                                        _runs(settings, [0.8, 0.81, 0.9, 0.91]))
        assert len(asked) == 1 and checks == []
