"""Recommendation rules on a table of runs: constraints on medians, and when a winner is claimed."""

from __future__ import annotations

import pandas as pd
import pytest

from mlflow_dlaas.report.recommend import recommend
from mlflow_dlaas.report.separation import ALPHA, MIN_REPLICATES, best_possible_p, separate
from mlflow_dlaas.runs.goals import parse_bound, parse_goal


def _runs(times: dict[str, list[float]], memory: dict[str, float] | None = None,
          validity: dict[str, list[str]] | None = None) -> pd.DataFrame:
    rows = []
    for system, values in times.items():
        for seed, value in enumerate(values):
            rows.append({"run_id": f"{system}-{seed}", "run_name": f"{system}-{seed}",
                         "experiment_id": "1", "entry": "train", "system": system,
                         "host": "aaaaaaaaaaaa", "params.seed": str(seed),
                         "validity": (validity or {}).get(system, ["valid"] * 9)[seed],
                         "metrics.Headline/train_time_seconds": value,
                         "metrics.Headline/peak_memory_megabytes": (memory or {}).get(system, 1e3)})
    return pd.DataFrame(rows)


def test_clearly_separated_replicates_give_a_winner() -> None:
    answer = recommend(_runs({"pytorch": [1.0, 1.1, 1.2, 1.3],
                              "tensorflow": [2.0, 2.1, 2.2, 2.3]}), parse_goal("train_time"))
    assert answer.best["system"] == "pytorch"
    assert answer.value.startswith("1.15 (median of 4 runs, IQR 1.075–1.225)")
    assert answer.separation.separated
    assert answer.separation.p_value == pytest.approx(2 / 70)  # exact: 2 of C(8, 4) orders
    assert answer.separation.text.startswith("a clear winner") and "p = 0.029" in answer.sentence()


def test_overlapping_replicates_are_not_separable() -> None:
    answer = recommend(_runs({"pytorch": [1.0, 1.5, 2.0, 2.5],
                              "tensorflow": [1.2, 1.6, 2.2, 2.4]}), parse_goal("train_time"))
    assert answer.best["system"] == "pytorch"  # the best median is still named ...
    assert not answer.separation.separated  # ... but not claimed a winner
    assert answer.separation.text.startswith("not separable from the next best: the gap could "
                                             "be noise (rank test p = 0.89")


def test_three_against_three_cannot_reach_the_alpha() -> None:
    """The exact two-sided test's smallest p for 3 against 3 runs is 2 / C(6, 3) = 0.1: even
    runs that do not overlap at all do not separate at 0.05, and the verdict says so."""
    assert ALPHA < best_possible_p(MIN_REPLICATES, MIN_REPLICATES) == pytest.approx(0.1)
    answer = recommend(_runs({"pytorch": [1.0, 1.1, 1.2], "tensorflow": [2.0, 2.1, 2.2]}),
                       parse_goal("train_time"))
    assert not answer.separation.separated and answer.separation.p_value == pytest.approx(0.1)
    assert "3 vs 3 valid runs are too few" in answer.separation.text
    assert "run each at least 4 times" in answer.separation.text
    assert separate([1.0, 1.1, 1.2], [2.0, 2.1, 2.2, 2.3, 2.4]).separated  # 3 vs 5: p = 0.036


def test_disturbed_and_unverified_runs_do_not_count_unless_included() -> None:
    runs = _runs({"pytorch": [1.0, 1.1, 1.2, 1.3], "tensorflow": [2.0, 2.1, 2.2, 2.3]},
                 validity={"pytorch": ["valid", "disturbed", "unverified", "valid"]})
    answer = recommend(runs, parse_goal("train_time"))
    assert answer.best["system"] == "pytorch" and not answer.separation.separated
    assert answer.separation.text == ("not separable from the next best: it has 2 valid runs, "
                                      "the next best 4; a winner needs at least 3 of each, so "
                                      "repeat the runs")
    counted = recommend(runs, parse_goal("train_time"), include_disturbed=True)
    assert counted.separation.separated
    assert counted.separation.text.endswith("4 vs 4 runs of any validity)")


def test_constraints_apply_to_medians_and_say_what_they_excluded() -> None:
    runs = _runs({"pytorch": [1.0, 1.1], "tensorflow": [2.0, 2.1]},
                 {"pytorch": 3 * 2**30 / 1e6, "tensorflow": 1 * 2**30 / 1e6})
    answer = recommend(runs, parse_goal("train_time"), (parse_bound("peak_memory<=2GiB"),))
    assert answer.best["system"] == "tensorflow"
    assert not answer.separation.separated
    assert answer.separation.text.startswith("the only qualifying configuration")
    none = recommend(runs, parse_goal("train_time"), (parse_bound("peak_memory<=1MiB"),))
    assert not none.found and none.excluded == {"peak_memory<=1MiB": 2}
    assert "no configuration qualifies (2 considered" in none.sentence()


def test_a_separated_gap_below_the_minimum_effect_is_no_winner() -> None:
    """With enough replicates any gap separates; 2 % is not a reason to choose a framework."""
    answer = recommend(_runs({"pytorch": [1.00, 1.001, 1.002, 1.003, 1.004],
                              "tensorflow": [1.02, 1.021, 1.022, 1.023, 1.024]}),
                       parse_goal("train_time"))
    assert answer.best["system"] == "pytorch"
    assert not answer.separation.separated and answer.separation.small_effect
    assert answer.separation.text.startswith(
        "no meaningful difference from the next best: medians 1.002 vs 1.022, 2.0% apart, "
        "below the 5% minimum (the rank test separates them: p = 0.0079")


def test_a_clear_winner_says_by_how_much() -> None:
    verdict = separate([1.0, 1.1, 1.2, 1.3], [2.0, 2.1, 2.2, 2.3])
    assert verdict.separated and verdict.text.startswith("a clear winner: 47% ahead of")


def test_the_answer_names_the_winner_and_only_the_settings_that_differ() -> None:
    rows = _runs({"pytorch": [1.0, 1.1, 1.2, 1.3], "tensorflow": [2.0, 2.1, 2.2, 2.3]})
    rows["params.log_model"] = "True"  # the same for every candidate: not worth a word
    rows["params.batch_size"] = ["64"] * 4 + ["32"] * 4
    answer = recommend(rows, parse_goal("train_time"))
    assert answer.sentence().startswith(
        "pytorch with batch_size=64: lowest train_time (Headline/train_time_seconds), 1.15 (median")
    assert "ahead of the next best (tensorflow with batch_size=32) beyond" in answer.sentence()
    assert answer.runner_up_names() == [("tensorflow with batch_size=32",
                                         answer.runners_up[0][1])]
    assert "log_model" not in answer.sentence()


def test_the_winner_is_named_by_what_differs_from_the_next_best_only() -> None:
    """A far runner-up (a one-run study trial at other settings) does not lengthen the
    winner's name with settings it shares with the configuration it is compared with."""
    rows = _runs({"mxnet": [1.0, 1.1, 1.2, 1.3], "pytorch": [2.0, 2.1, 2.2, 2.3],
                  "pytorch-trial": [3.0]})
    rows["system"] = rows["system"].str.removesuffix("-trial")
    rows["params.epochs"] = ["2"] * 8 + ["1"]
    rows["params.log_model"] = ["True"] * 8 + ["False"]
    answer = recommend(rows, parse_goal("train_time"))
    assert answer.winner() == "mxnet"
    assert answer.runner_up_names()[-1][0] == "pytorch with epochs=1, log_model=False"


def test_an_accuracy_goal_on_synthetic_data_is_refused_with_the_reason() -> None:
    from mlflow_dlaas.errors import ConfigError

    rows = _runs({"pytorch": [1.0, 1.1], "tensorflow": [2.0, 2.1]}).assign(**{
        "accuracy_note": "not measured (synthetic data)",
        "params.dataset": "synthetic_imagenet"})
    with pytest.raises(ConfigError, match="not measured .synthetic data.: these runs trained "
                                          "on synthetic_imagenet"):
        recommend(rows, parse_goal("accuracy"))
    assert recommend(rows, parse_goal("train_time")).best["system"] == "pytorch"


def test_a_recommendation_names_an_unset_thread_count_as_the_tables_do() -> None:
    """MXNet's unset thread count ran one thread on a 2-core x86 machine: the answer says
    ``default (1)``, as the report's tables do, not a bare ``default``."""
    runs = _runs({"mxnet": [1.0, 1.1, 1.2, 1.3], "pytorch": [2.0, 2.1, 2.2, 2.3]})
    runs["params.intra_op_threads"] = ["", "", "", "", "2", "2", "2", "2"]
    runs["params.in_force_intra_op_threads"] = ["1"] * 4 + ["2"] * 4
    answer = recommend(runs, parse_goal("train_time"))
    assert answer.best == {"system": "mxnet", "intra_op_threads": "default (1)"}
    assert answer.winner() == "mxnet with intra_op_threads=default (1)"
