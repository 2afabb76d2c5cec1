"""Recommendation rules on a table of runs: one statistic (the geometric mean) ranks, bounds
and compares; when a winner is claimed."""

from __future__ import annotations

import pandas as pd
import pytest

from mlflow_dlaas.report.effect import Verdict, compare_runs
from mlflow_dlaas.report.recommend import decided_line, recommend, recommend_each_workload
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


def test_clearly_separated_replicates_give_a_winner_with_an_interval() -> None:
    answer = recommend(_runs({"pytorch": [1.0, 1.1, 1.2, 1.3],
                              "tensorflow": [2.0, 2.1, 2.2, 2.3]}), parse_goal("train_time"))
    assert answer.best["system"] == "pytorch" and answer.verdict == "winner"
    assert answer.value.startswith("1.14 s (geometric mean of 4 valid runs, IQR 1.08–1.23 s)")
    assert answer.effect is not None and answer.effect.verdict is Verdict.BETTER
    assert answer.effect.p_value == pytest.approx(2 / 70)  # exact: 2 of C(8, 4) orders
    assert answer.effect.low < answer.effect.ratio < answer.effect.high < 1
    assert "ahead of the next best (tensorflow) by 47 % (ratio 0.533, 95 % CI 0.435–0.650)" in \
        answer.sentence()
    assert answer.test_text() == "permutation test, unpaired, p = 0.029, 4 vs 4 valid runs"


def test_the_winner_and_its_ratio_use_one_statistic() -> None:
    """pytorch has the lower median (1.0 against 1.05) but one slow run; tensorflow has the
    lower geometric mean. Ranked by median with the ratio of geometric means, the winner's
    ratio came out above 1 for a time ("lowest ... ratio 1.24"): now both use the same one."""
    answer = recommend(_runs({"pytorch": [0.98, 1.0, 1.0, 1.0, 3.0],
                              "tensorflow": [1.04, 1.05, 1.05, 1.05, 1.06]}),
                       parse_goal("train_time"))
    assert answer.best["system"] == "tensorflow"
    assert answer.effect is not None and answer.effect.ratio < 1
    assert answer.runner_up_names()[0][1].startswith("1.24 s (geometric mean of 5")
    for goal in ("train_time", "max:Headline/train_time_seconds"):
        found = recommend(_runs({"a": [1.0, 2.0, 9.0, 1.5], "b": [1.6, 1.7, 1.8, 1.9]}),
                          parse_goal(goal))
        assert found.effect is not None
        assert (found.effect.ratio <= 1) == (found.goal.direction == "minimize")


def test_overlapping_replicates_are_not_separable() -> None:
    answer = recommend(_runs({"pytorch": [1.0, 1.5, 2.0, 2.5],
                              "tensorflow": [1.2, 1.6, 2.2, 2.4]}), parse_goal("train_time"))
    assert answer.best["system"] == "pytorch"  # the best median is still named ...
    assert answer.verdict == "open"  # ... but not claimed a winner
    assert "not separable from the next best (tensorflow) (ratio 0.9" in answer.sentence()
    assert "the gap could be noise" in answer.sentence()


def test_three_against_three_are_too_few_runs() -> None:
    """The exact two-sided test's smallest p for 3 against 3 runs is 2 / C(6, 3) = 0.1: even
    runs that do not overlap at all cannot separate at 0.05, and the verdict says so."""
    answer = recommend(_runs({"pytorch": [1.0, 1.1, 1.2], "tensorflow": [2.0, 2.1, 2.2]}),
                       parse_goal("train_time"))
    assert answer.effect is not None and answer.effect.verdict is Verdict.TOO_FEW
    assert "too few runs to tell it from the next best (tensorflow) (3 vs 3: 20 " \
        "arrangements" in answer.sentence()
    assert compare_runs([1.0, 1.1, 1.2], [2.0, 2.1, 2.2, 2.3, 2.4],
                        lower_is_better=True).verdict is Verdict.BETTER  # 3 vs 5: 56 orders


def test_disturbed_and_unverified_runs_do_not_count_unless_included() -> None:
    runs = _runs({"pytorch": [1.0, 1.1, 1.2, 1.3], "tensorflow": [2.0, 2.1, 2.2, 2.3]},
                 validity={"pytorch": ["valid", "disturbed", "unverified", "valid"]})
    answer = recommend(runs, parse_goal("train_time"))
    assert answer.best["system"] == "pytorch" and answer.verdict == "open"
    assert answer.sentence().endswith(
        "too few runs to tell it from the next best (tensorflow) (2 vs 4; 4 a side needed); "
        "about 8 more rounds of mlflow-dlaas decide would settle it")
    counted = recommend(runs, parse_goal("train_time"), include_disturbed=True)
    assert counted.verdict == "winner"
    assert counted.test_text().endswith("4 vs 4 runs of any validity")


def test_constraints_apply_to_medians_and_say_what_they_excluded() -> None:
    runs = _runs({"pytorch": [1.0, 1.1], "tensorflow": [2.0, 2.1]},
                 {"pytorch": 3 * 2**30 / 1e6, "tensorflow": 1 * 2**30 / 1e6})
    answer = recommend(runs, parse_goal("train_time"), (parse_bound("peak_memory<=2GiB"),))
    assert answer.best["system"] == "tensorflow" and answer.verdict == "only"
    assert answer.sentence().endswith("the only qualifying configuration: nothing to compare "
                                      "it with")
    none = recommend(runs, parse_goal("train_time"), (parse_bound("peak_memory<=1MiB"),))
    assert not none.found and none.excluded == {"peak_memory<=1MiB": 2}
    assert none.verdict == "none" and "no configuration qualifies (2 considered" in \
        none.sentence()


def test_a_gap_within_the_minimum_effect_is_no_meaningful_difference() -> None:
    """With enough replicates any gap separates; 2 % is not a reason to choose a framework."""
    answer = recommend(_runs({"pytorch": [1.00, 1.001, 1.002, 1.003, 1.004],
                              "tensorflow": [1.02, 1.021, 1.022, 1.023, 1.024]}),
                       parse_goal("train_time"))
    assert answer.best["system"] == "pytorch" and answer.verdict == "tie"
    assert "no meaningful difference from the next best (tensorflow) (ratio 0.980, 95 % CI " \
        "0.97" in answer.sentence() and "within ±5%" in answer.sentence()


def test_the_evidence_is_the_runs_the_figure_came_from() -> None:
    """A replicate that never logged the objective (a training run that never reached its
    target accuracy has no time to accuracy) is not evidence for the figure."""
    answer = recommend(_runs({"pytorch": [0.7, float("nan")], "tensorflow": [1.0, 1.1]}),
                       parse_goal("train_time"))
    assert answer.value == "0.700 s (1 run)"
    assert [e.run_id for e in answer.evidence] == ["pytorch-0"]


def test_runs_of_two_models_get_one_answer_each_never_ranked_together() -> None:
    rows = pd.concat([
        _runs({"pytorch": [1.0, 1.1, 1.2, 1.3], "tensorflow": [2.0, 2.1, 2.2, 2.3]})
        .assign(**{"params.model": "lenet5"}),
        _runs({"pytorch": [90.0, 91.0, 92.0, 93.0], "tensorflow": [50.0, 51.0, 52.0, 53.0]})
        .assign(**{"params.model": "resnet50", "run_id": lambda f: f["run_id"] + "-r50"})])
    answers = recommend_each_workload(rows, parse_goal("train_time"))
    assert [a.workload for a in answers] == ["train · lenet5", "train · resnet50"]
    assert [a.best["system"] for a in answers] == ["pytorch", "tensorflow"]
    for answer in answers:
        ids = {e.run_id for e in answer.evidence}
        model = answer.workload.rsplit(" ", 1)[1]
        assert set(rows.set_index("run_id").loc[sorted(ids), "params.model"]) == {model}
        assert len(answer.runners_up) == 1  # the other framework of its own model only
    assert answers[1].as_json()["best"] == {"system": "tensorflow"}


def test_the_answer_names_the_winners_recipe_and_the_runner_up_by_what_differs() -> None:
    rows = _runs({"pytorch": [1.0, 1.1, 1.2, 1.3], "tensorflow": [2.0, 2.1, 2.2, 2.3]})
    rows["params.log_model"] = "True"  # the same for every candidate: not worth a word
    rows["params.batch_size"] = ["64"] * 4 + ["32"] * 4
    answer = recommend(rows, parse_goal("train_time"))
    assert answer.sentence().startswith(
        "pytorch with batch_size=64: lowest train_time (Headline/train_time_seconds), 1.14 s "
        "(geometric mean")
    assert "ahead of the next best (tensorflow with batch_size=32) by 47 %" in answer.sentence()
    assert answer.runner_up_names() == [("tensorflow with batch_size=32",
                                         answer.runners_up[0][1])]
    assert "log_model" not in answer.sentence()


def test_the_winner_is_named_by_its_whole_recipe() -> None:
    """A winner that differs from the runner-up in one setting but from the others in three
    is named by all three: the name was once cut to what differed from the next best
    ("openvino: highest throughput" with no batch size or threads)."""
    rows = _runs({"onnxruntime": [1.0, 1.1, 1.2, 1.3], "openvino": [2.0, 2.1, 2.2, 2.3],
                  "pytorch": [3.0, 3.1, 3.2, 3.3]})
    rows["params.intra_op_threads"] = ["2"] * 8 + ["1"] * 4
    rows["params.precision"] = ["int8"] * 8 + ["fp32"] * 4
    rows["batch_size"] = ["8"] * 8 + ["1"] * 4
    rows["params.log_model"] = "True"  # nuisance: never part of a recipe
    answer = recommend(rows, parse_goal("train_time"))
    assert answer.winner() == ("onnxruntime with batch_size=8, intra_op_threads=2, "
                               "precision=int8")
    assert answer.sentence().startswith(answer.winner() + ": lowest")
    assert answer.runner_up_names()[0][0] == "openvino"  # told apart by its system alone
    assert answer.as_json()["best"] == {"system": "onnxruntime", "batch_size": "8",
                                        "intra_op_threads": "2", "precision": "int8"}


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


def test_a_study_report_answers_the_studys_own_objectives(tracking: str) -> None:
    """A study's parent run records its objectives and constraints; a report on its study or
    on the experiment holding it asks them, in plain words."""
    import mlflow

    from mlflow_dlaas.report.collect import collect_runs
    from mlflow_dlaas.runs.schema import ENTRY_TAG, ROLE_TAG, STUDY_TAG

    mlflow.set_experiment("holds-a-study")
    with mlflow.start_run(tags={ROLE_TAG: "study", STUDY_TAG: "fit-study"}):
        mlflow.log_params({"objectives": "minimize:wall_time_seconds,"
                                         "maximize:Headline/test_accuracy",
                           "constraints": "peak_memory<=2GiB"})
    with mlflow.start_run(tags={STUDY_TAG: "fit-study", ENTRY_TAG: "train"}):
        mlflow.log_metric("wall_time_seconds", 1.0)
    for scope in ({"study": "fit-study"}, {"experiment": "holds-a-study"}):
        asks = collect_runs(mlflow.MlflowClient(), **scope).study_asks()["fit-study"]
        assert [(goal.metric, goal.direction, goal.text) for goal, _ in asks] == [
            ("wall_time_seconds", "minimize", "wall_time"),
            ("Headline/test_accuracy", "maximize", "accuracy")]
        assert all(bound.text == "peak_memory<=2GiB" for _, bounds in asks for bound in bounds)


def _failed(system: str, count: int, reason: str, **params: str) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": f"{system}-failed-{i}", "run_name": "", "experiment_id": "1",
                          "entry": "train", "system": system, "host": "aaaaaaaaaaaa",
                          "status": "FAILED", "params.seed": str(9 + i),
                          "failure_reason": f"Traceback ...\nWorkerError: {reason}",
                          **{f"params.{k}": v for k, v in params.items()}}
                         for i in range(count)])


def test_a_winner_that_failed_in_some_runs_says_so() -> None:
    """One of int8's replicates failed its equivalence check: int8 may still have the best
    figure from the runs that passed, but its answer says it failed, and why."""
    rows = _runs({"int8": [1.0, 1.1, 1.2, 1.3], "fp32": [2.0, 2.1, 2.2, 2.3]})
    reason = "top-1 agreement with fp32 0.625 < 0.75 (the equivalence rule)"
    answer = recommend(rows, parse_goal("train_time"), failed=_failed("int8", 1, reason))
    assert answer.best["system"] == "int8"
    assert f"; but it failed in 1 of 5 runs ({reason}); ahead of" in answer.sentence()
    assert answer.as_json()["failed_runs"] == {"failed": 1, "of": 5, "reason": reason}
    quiet = recommend(rows, parse_goal("train_time"), failed=_failed("fp32", 2, "oom"))
    assert "failed" not in quiet.sentence().split("; ahead of")[0]
    assert quiet.runner_up_names()[0][1].endswith("; failed in 2 of 6 runs (oom)")
    outage = _failed("int8", 1, "ConnectionError").assign(store_outage="failed while ...")
    during = recommend(rows, parse_goal("train_time"), failed=outage)
    assert "failed" not in during.sentence()  # the server's outage, not int8's failure


def test_a_configuration_that_failed_in_every_run_is_named_as_tried() -> None:
    """learning_rate=0.1 diverged in every run: the answer over the runs that finished says
    it was tried, instead of listing learning_rate=0.01 as if nothing else had been."""
    rows = _runs({"pytorch": [1.0, 1.1, 1.2, 1.3]}).assign(**{"params.learning_rate": "0.01"})
    failed = _failed("pytorch", 6, "the training loss is NaN at epoch 1",
                     learning_rate="0.1")
    answer = recommend(rows, parse_goal("train_time"), failed=failed)
    assert answer.never_finished == (
        "learning_rate=0.1: failed in all 6 runs (the training loss is NaN at epoch 1)",)
    other_model = failed.assign(**{"params.model": "resnet50"})
    rows = rows.assign(**{"params.model": "lenet5"})
    assert recommend(rows, parse_goal("train_time"), failed=other_model).never_finished == ()


def test_markedly_different_spreads_are_said() -> None:
    steady, erratic = [1.0, 1.01, 1.02, 1.03], [1.5, 1.9, 2.6, 3.0]
    answer = recommend(_runs({"pytorch": steady, "tensorflow": erratic}),
                       parse_goal("train_time"))
    assert "; spreads differ: IQR 1.5 % of the median against 40 % for the next best" in \
        answer.sentence()
    alike = recommend(_runs({"pytorch": steady, "tensorflow": [2.0, 2.02, 2.04, 2.06]}),
                      parse_goal("train_time"))
    assert "spreads differ" not in alike.sentence()


def test_an_open_grid_answer_says_which_settings_are_decided_one_by_one() -> None:
    """The demo's study: the two best cells (2 threads, another allocator) cannot be told
    apart with 2 runs each, but 2 threads against 1, matched in every (allocator) cell, is
    decided: the answer says so and names the setting still open."""
    times = {("2", "jemalloc"): [1.30, 1.38], ("2", "default"): [1.36, 1.42],
             ("1", "jemalloc"): [2.10, 2.20], ("1", "default"): [2.15, 2.25]}
    rows = []
    for (threads, allocator), values in times.items():
        for openmp, slower in (("default", 1.0), ("intel", 1.02)):
            for seed, value in enumerate(values):
                rows.append({"run_id": f"{threads}-{allocator}-{openmp}-{seed}",
                             "run_name": "r", "experiment_id": "1", "entry": "train",
                             "system": "pytorch", "host": "aaaaaaaaaaaa",
                             "params.seed": str(seed), "validity": "valid",
                             "params.intra_op_threads": threads, "params.allocator": allocator,
                             "params.openmp_runtime": openmp,
                             "metrics.Headline/train_time_seconds": value * slower})
    answer = recommend(pd.DataFrame(rows), parse_goal("train_time"))
    assert answer.best == {"system": "pytorch", "allocator": "jemalloc",
                           "intra_op_threads": "2", "openmp_runtime": "default"}
    assert answer.effect is not None and answer.effect.verdict is Verdict.TOO_FEW
    assert answer.verdict == "part"
    assert answer.in_part.startswith(
        "decided setting by setting, each matched with the others held fixed: "
        "intra_op_threads=2 (better than 1: ratio 0.627, 95 % CI 0.607–0.649")
    assert answer.in_part.endswith("matched within 4 cells (pooled over allocator, "
                                   "openmp_runtime)); not yet told apart: allocator, "
                                   "openmp_runtime")
    assert answer.as_json()["decided_in_part"] == answer.in_part


def test_an_open_answer_names_every_configuration_not_yet_told_from_the_best() -> None:
    """What ``decide`` measures more of: the leader and each rival it could not be told
    from, not only the next best; a configuration decided worse is left out."""
    answer = recommend(_runs({"a": [1.00, 1.10, 1.20, 1.30], "b": [1.05, 1.12, 1.22, 1.32],
                              "c": [1.02, 1.15, 1.25, 1.35], "d": [3.0, 3.1, 3.2, 3.3]}),
                       parse_goal("train_time"))
    assert answer.best["system"] == "a" and answer.verdict == "open"
    assert [{r.split("-")[0] for r in ids} for ids in answer.contender_run_ids] == \
        [{"b"}, {"c"}]
    settled = recommend(_runs({"a": [1.0, 1.1, 1.2, 1.3], "d": [3.0, 3.1, 3.2, 3.3]}),
                        parse_goal("train_time"))
    assert settled.verdict == "winner" and settled.contender_run_ids == ()


def _grid_rows(times: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    return pd.DataFrame([
        {"run_id": f"{threads}-{allocator}-{seed}", "run_name": "r", "experiment_id": "1",
         "entry": "train", "system": "pytorch", "host": "aaaaaaaaaaaa",
         "params.seed": str(seed), "validity": "valid", "params.intra_op_threads": threads,
         "params.allocator": allocator, "metrics.Headline/train_time_seconds": value}
        for (threads, allocator), values in times.items() for seed, value in enumerate(values)])


def test_a_recipe_whose_every_setting_is_decided_is_decided_setting_by_setting() -> None:
    """The demo's study on a quiet machine: the best cell's slow fourth run keeps it from
    being told from the next whole cell, but 2 threads and the default allocator are each
    plainly better, matched cell by cell (each test at 5 %/2): the recipe is decided."""
    times = {("2", "default"): [0.97, 0.98, 1.00, 1.18],
             ("2", "jemalloc"): [1.13, 1.15, 1.17, 1.19],
             ("1", "default"): [1.45, 1.47, 1.49, 1.51],
             ("1", "jemalloc"): [1.63, 1.65, 1.67, 1.69]}
    answer = recommend(_grid_rows(times), parse_goal("train_time"))
    assert answer.best == {"system": "pytorch", "allocator": "default", "intra_op_threads": "2"}
    assert answer.effect is not None and answer.effect.verdict is Verdict.NOT_SEPARABLE
    assert (answer.verdict, answer.decided) == ("settings", True)
    assert answer.in_part.startswith("the whole recipe is decided setting by setting (each "
                                     "of its 2 comparisons at 0.05/2")
    assert decided_line([answer]).startswith("decided: 1 of 1 questions")


def test_the_settings_decide_the_recipe_only_each_at_its_bonferroni_level() -> None:
    from mlflow_dlaas.report.effect import Effect
    from mlflow_dlaas.report.settings_apart import SettingVerdict, recipe_decided

    def better(p: float) -> Effect:
        return Effect(Verdict.BETTER, 0.8, 0.7, 0.9, p, (8, 8), "matched", True)

    threads = SettingVerdict("intra_op_threads", "2", (("1", better(0.001)),))
    assert recipe_decided([threads, SettingVerdict("allocator", "default",
                                                   (("jemalloc", better(0.01)),))])
    assert not recipe_decided([threads, SettingVerdict("allocator", "default",
                                                       (("jemalloc", better(0.03)),))])
