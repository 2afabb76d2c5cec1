"""Study spec validation: every error names the key and what would be valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.tuning.spec import load_spec, parse_spec, replicate_seed

GOOD = {
    "name": "s",
    "frameworks": ["pytorch"],
    "fixed": {"model": "mlp"},
    "search_space": {"batch_size": [16, 32], "learning_rate": {"type": "float", "low": 1e-3,
                                                               "high": 1e-1, "log": True}},
    "objectives": [{"metric": "accuracy", "direction": "maximize"}],
}


def test_a_good_spec_gets_defaults_and_aliases() -> None:
    spec = parse_spec(GOOD)
    assert spec.objectives[0].metric == "final_test_accuracy"
    assert spec.sampler == "tpe" and spec.pruner == "none" and spec.n_trials == 10
    assert spec.replicates == 1 and spec.replicate_seeds == "vary"
    assert [d.kind for d in spec.search_space] == ["categorical", "float"]


def test_an_inference_study_in_a_named_experiment() -> None:
    spec = parse_spec({**GOOD, "entry_point": "infer", "frameworks": ["onnxruntime"],
                       "experiment": "serving", "objectives": [
                           {"metric": "p99_latency", "direction": "minimize"}]})
    assert spec.experiment == "serving" and spec.frameworks == ("onnxruntime",)
    assert spec.objectives[0].metric == "single_stream/latency_p99_ms"


def test_several_objectives_default_to_nsga2() -> None:
    spec = parse_spec({**GOOD, "objectives": [
        {"metric": "accuracy", "direction": "maximize"},
        {"metric": "train_time", "direction": "minimize"}]})
    assert spec.sampler == "nsga2" and spec.multi_objective


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"frameworks": ["caffe"]},
         "frameworks: unknown train project 'caffe'; valid for entry_point train: mxnet"),
        ({"frameworks": ["onnxruntime"]}, "valid for entry_point train: mxnet, pytorch"),
        ({"entry_point": "infer", "frameworks": ["caffe"]},
         "valid for entry_point infer: mxnet, onnxruntime, openvino, pytorch, tensorflow"),
        ({"entry_point": "infer", "frameworks": ["onnxruntime"], "pruner": "median"},
         "pruner: infer runs report no per-epoch metric"),
        ({"frameworks": None}, "frameworks: give a list"),
        ({"sampler": "cmaes"}, "sampler: 'cmaes' is not one of tpe, nsga2, gp, grid, random"),
        ({"pruner": "asha"}, "pruner: 'asha' is not one of none, median, hyperband"),
        ({"search_space": {"lr": {"type": "flaot", "low": 0, "high": 1}}},
         r"search_space.lr.type: 'flaot' is not one of float, int, categorical"),
        ({"search_space": {"lr": {"type": "float", "low": 1, "high": 0.1}}},
         r"search_space.lr: low \(1.0\) must be below high"),
        ({"search_space": {"lr": {"type": "float", "low": 0, "high": 1, "log": True}}},
         "log scale needs low > 0"),
        ({"objectives": []}, "objectives: give at least one"),
        ({"objectives": [{"metric": "accuracy", "direction": "up"}]},
         r"objectives\[0\].direction: 'up' is not one of maximize, minimize"),
        ({"constraints": [{"metric": "accuracy", "op": ">", "value": 0.9}]},
         r"constraints\[0\].op: '>' is not one of >=, <="),
        ({"n_trials": 0}, "n_trials: must be a whole number >= 1"),
        ({"replicates": "two"}, "replicates: must be a whole number >= 1"),
        ({"replicate_seeds": "same"}, "replicate_seeds: 'same' is not one of vary, fixed"),
        ({"replicate_seeds": None}, "replicate_seeds: None is not one of vary, fixed"),
        ({"fixed": {"seed": "7"}}, "fixed.seed: must be a whole number, got '7'"),
        ({"search_space": {"seed": {"type": "float", "low": 0, "high": 9}}},
         "search_space.seed: give type: int or whole-number choices"),
        ({"search_space": {"seed": [1, 2.5]}}, "search_space.seed: give type: int"),
        ({"env_manager": "conda"}, "env_manager: 'conda' is not one of local, virtualenv, uv"),
        ({"trails": 3}, "unknown key.*trails"),
        ({"fixed": {"batch_size": 8}}, "batch_size is both fixed and searched"),
        ({"sampler": "grid"}, "search_space.learning_rate: the grid sampler needs"),
        ({"pruner": "median", "objectives": [{"metric": "a", "direction": "maximize"},
                                              {"metric": "b", "direction": "minimize"}]},
         "prunes single-objective studies only"),
    ],
)
def test_bad_specs_name_the_key(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_spec({**GOOD, **change})


@pytest.mark.parametrize("choice", ["vary", "fixed"])
def test_replicate_seeds_is_kept(choice: str) -> None:
    spec = parse_spec({**GOOD, "replicates": 3, "replicate_seeds": choice,
                       "fixed": {"model": "mlp", "seed": 5},
                       "search_space": {"batch_size": [16, 32]}})
    assert spec.replicate_seeds == choice and spec.fixed["seed"] == 5


def test_a_searched_whole_number_seed_is_accepted() -> None:
    spec = parse_spec({**GOOD, "search_space": {"seed": {"type": "int", "low": 0, "high": 9}}})
    assert spec.search_space[0].name == "seed"
    assert parse_spec({**GOOD, "search_space": {"seed": [0, 10, 20]}}).search_space


@pytest.mark.parametrize(
    ("trial_params", "replicate_seeds", "seeds"),
    [
        ({"model": "mlp"}, "vary", [0, 1, 2]),  # the entry points' default seed 0
        ({"model": "mlp", "seed": 7}, "vary", [7, 8, 9]),  # fixed or sampled
        ({"model": "mlp"}, "fixed", [0, 0, 0]),
        ({"model": "mlp", "seed": 7}, "fixed", [7, 7, 7]),
    ],
)
def test_the_seed_each_replicate_runs_with(trial_params: dict, replicate_seeds: str,
                                           seeds: list[int]) -> None:
    assert [replicate_seed(trial_params, r, replicate_seeds) for r in range(3)] == seeds


def test_missing_or_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_spec(broken)


def test_every_example_spec_is_valid() -> None:
    examples = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
    assert examples
    for path in examples:
        assert load_spec(path).name
