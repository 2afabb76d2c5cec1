"""Study spec validation: every error names the key and what would be valid."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

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
    assert spec.objectives[0].metric == "Headline/test_accuracy"
    assert spec.sampler == "tpe" and spec.pruner == "none" and spec.n_trials == 10
    assert spec.replicates == 1 and spec.replicate_seeds == "vary"
    assert [d.kind for d in spec.search_space] == ["categorical", "float"]


def test_an_inference_study_in_a_named_experiment() -> None:
    spec = parse_spec({**GOOD, "entry_point": "infer", "frameworks": ["onnxruntime"],
                       "experiment": "serving", "fixed": {"batch_sizes": "1"},
                       "search_space": {"intra_op_threads": [1, 2]}, "objectives": [
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
        ({"entry_point": "infer", "frameworks": ["onnxruntime"], "pruner": "median",
          "search_space": {}}, "pruner: infer runs report no per-epoch metric"),
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
        ({"constraints": [{"metric": "accuracy", "op": "=>", "value": 0.9}]},
         r"constraints\[0\].op: '=>' is not one of <=, >=, <, >"),
        ({"objectives": [{"metric": "throughput", "direction": "maximize"}]},
         "'throughput' names two figures; write train_throughput .* or inference_throughput"),
        ({"n_trials": 0}, "n_trials: must be a whole number >= 1"),
        ({"replicates": "two"}, "replicates: must be a whole number >= 1"),
        ({"replicates": 1_000_000_000}, "replicates: 1,000,000,000 is more than the 1,000 a "
                                        "study runs"),
        ({"n_trials": 10**12}, "n_trials: 1,000,000,000,000 is more than the 100,000"),
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
        ({"search_space": [1, 2]}, "search_space: give a mapping of parameter name"),
        ({"fixed": {1: 2}}, "fixed: give a mapping of parameter name to value"),
        ({"objectives": [{"metric": ["a"], "direction": "maximize"}]},
         r"objectives\[0\]: give .metric: NAME, direction: maximize. .metric: one name."),
        ({"constraints": [{"metric": {"a": 1}, "op": "<=", "value": 1}]},
         r"constraints\[0\]: give"),
        ({"sampler": "grid", "search_space": {"batch_size": {
            "type": "int", "low": 1, "high": 2147483647, "step": 1}}},
         "the grid has 2,147,483,647 points .2147483647., more than the 10,000"),
        ({"sampler": "grid", "search_space": {
            name: {"type": "int", "low": 1, "high": 2000, "step": 1}
            for name in ("batch_size", "epochs", "warmup_steps")}},
         r"the grid has 8,000,000,000 points \(2000 x 2000 x 2000\)"),
        ({"fixed": {"api_token": "t-1f9"}}, "fixed.api_token: looks like a credential.*"
                                             "environment variable"),
        ({"fixed": {"note": "token=t-1f9"}}, "fixed.note: looks like a credential"),
        ({"search_space": {"db_password": ["a", "b"]}},
         "search_space.db_password: looks like a credential"),
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


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"fixed": {"lerning_rate": 0.1}},
         "fixed: unknown training parameter.*lerning_rate; valid: .*learning_rate"),
        ({"fixed": {"model": "lenet6"}}, "fixed: unknown model 'lenet6'; choose one of"),
        ({"fixed": {"dataset": "imagenet"}}, "fixed: unknown dataset 'imagenet'"),
        ({"fixed": {"momentum": 1.5}}, r"fixed: momentum must be in \[0, 1\)"),
        ({"fixed": {"bad key!": 1}}, "fixed: unknown training parameter.*bad key!"),
        ({"fixed": {"framework": "tensorflow"}}, "framework: the frameworks key chooses"),
        ({"fixed": {"data_dir": "x" * 7000}}, "longer than the 6000 characters"),
        ({"search_space": {"batch_size": {"type": "int", "low": 0, "high": 64}}},
         "search_space.batch_size=0: batch_size must be > 0"),
        ({"search_space": {"batch_size": {"type": "float", "low": 8, "high": 64}}},
         "search_space.batch_size=36.5: batch_size must be an integer"),
        ({"search_space": {"optimizer": ["sgd", "adamw"]}},
         "search_space.optimizer='adamw': optimizer must be one of sgd, adam"),
        ({"search_space": {"batch_sizes": [[1, 8], [32]]}},
         "search_space.batch_sizes.choices: each choice must be a number"),
        ({"seed": "abc"}, "seed: must be a whole number from 0 to 2\\*\\*32 - 1"),
        ({"seed": -1}, "seed: must be a whole number"),
        ({"seed": 1.5}, "seed: must be a whole number"),
        ({"timeout_s": float("inf")}, "timeout_s: must be a finite number of seconds > 0"),
        ({"timeout_s": float("nan")}, "timeout_s: must be a finite number"),
        ({"trial_timeout_s": float("inf")}, "trial_timeout_s: must be a finite number"),
        ({"name": "n" * 251}, "name: 251 characters; MLflow keeps 250"),
        ({"experiment": "e" * 501}, "experiment: MLflow refuses it as an experiment name"),
        ({"entry_point": "infer", "frameworks": ["onnxruntime"],
          "fixed": {"batch_sizes": "1,x"}}, "fixed: batch_sizes must be an integer"),
        ({"entry_point": "infer", "frameworks": ["onnxruntime"],
          "fixed": {"model": "lenet6"}}, "fixed: unknown model 'lenet6'"),
        ({"entry_point": "infer", "frameworks": ["onnxruntime"], "fixed": {},
          "search_space": {"scenarios": ["offline", "batch"]}},
         "search_space.scenarios='batch': scenarios"),
    ],
)
def test_values_are_checked_as_the_entry_point_reads_them(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_spec({**GOOD, **change})


def test_valid_values_of_the_entry_points_pass() -> None:
    spec = parse_spec({**GOOD, "seed": 7, "timeout_s": 60,
                       "fixed": {"model": "mlp", "dataset": "digits", "log_model": False,
                                 "intra_op_threads": 1, "preset": "torch_mnist"},
                       "search_space": {"batch_size": {"type": "int", "low": 8, "high": 64},
                                        "momentum": {"type": "float", "low": 0, "high": 0.9}}})
    assert spec.seed == 7 and spec.timeout_s == 60.0
    infer = parse_spec({**GOOD, "entry_point": "infer", "frameworks": ["onnxruntime"],
                        "fixed": {"batch_sizes": "1,8", "model": "resnet18"},
                        "search_space": {"intra_op_threads": [1, 2]}})
    assert infer.fixed["batch_sizes"] == "1,8"


@pytest.mark.parametrize("spec", [
    {"fixed": {"lerning_rate": 0.1}},
    {"seed": "abc"},
])
def test_a_bad_spec_exits_2_in_one_line_and_creates_nothing(
    cli_path: str, tmp_path: Path, spec: dict
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**GOOD, **spec}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    out = subprocess.run([cli_path, "study", str(path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("mlflow-dlaas: error: study spec: ")
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]  # no store, no study


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"constraints": [{"metric": "accuracy", "op": ">=", "value": float("nan")}]},
         r"constraints\[0\].value: must be a finite number, got nan"),
        ({"constraints": [{"metric": "accuracy", "op": ">=", "value": "high"}]},
         r"constraints\[0\].value: 'high' is not a number with an optional unit"),
        ({"search_space": {"learning_rate": {"type": "float", "low": 0.001, "high": 0.1,
                                             "log": "false"}}},
         "search_space.learning_rate.log: write true or false"),
        ({"search_space": {"learning_rate": {"type": "float", "low": 0.001,
                                             "high": float("inf")}}},
         "search_space.learning_rate.high: must be a finite number, got inf"),
        ({"search_space": {"batch_size": {"type": "int", "low": 8, "high": 64, "step": "abc"}}},
         "search_space.batch_size.step: must be a finite number, got 'abc'"),
        ({"search_space": {"batch_size": {"type": "int", "low": 8, "high": 64, "step": 0}}},
         "search_space.batch_size.step: must be > 0"),
        ({"search_space": {"batch_size": {"type": "int", "low": 8, "high": 1e300}}},
         "search_space.batch_size: int bounds must lie within"),
    ],
)
def test_numbers_and_booleans_are_typed_strictly(change: dict, message: str) -> None:
    """A NaN bound would make every trial feasible, "false" would turn log scale on, 1e300
    would train a batch of 10^300: each is one line, exit 2, before anything runs."""
    with pytest.raises(ConfigError, match=message):
        parse_spec({**GOOD, **change})


def test_yaml_exponents_without_a_dot_are_numbers() -> None:
    """PyYAML reads ``1e-4`` as a string; a spec that writes it so is still a number."""
    spec = parse_spec({**GOOD, "search_space": {
        "learning_rate": {"type": "float", "low": "1e-4", "high": "1e-1", "log": True}}})
    (dimension,) = [d for d in spec.search_space if d.name == "learning_rate"]
    assert (dimension.low, dimension.high, dimension.log) == (1e-4, 0.1, True)


@pytest.mark.parametrize("text", [
    "name: x\nsearch_space: " + "[" * 270_000 + "]" * 270_000 + "\n",
    "{\"name\": \"x\", \"fixed\": " + "{\"a\": " * 50_000 + "1" + "}" * 50_000 + "}\n",
])
def test_a_spec_nested_past_the_depth_limit_is_one_line(tmp_path: Path, text: str) -> None:
    """800 KB of brackets ended in a 2,994-line RecursionError."""
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"nested more than 32 levels deep"):
        load_spec(path)


def test_yaml_aliases_are_refused_before_they_expand(tmp_path: Path) -> None:
    """'Billion laughs': nine levels of nine aliases would be 10^9 values."""
    lines = ["name: laughs", "frameworks: [pytorch]", 'a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 9)}]" for i in range(1, 10)]
    lines += ["fixed: {x: *a9}"]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines))
    with pytest.raises(ConfigError, match=r"line 4: YAML aliases \(\*name\) are not accepted"):
        load_spec(path)


@pytest.mark.parametrize("kind", ["device", "binary", "huge", "folder"])
def test_a_spec_that_is_not_a_small_text_file_is_refused_at_once(tmp_path: Path,
                                                                 kind: str) -> None:
    path = {"device": Path("/dev/zero"), "folder": tmp_path}.get(kind, tmp_path / "spec.yaml")
    if kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    if kind == "huge":
        path.write_text("name: x\n" + "# padding\n" * 200_000)
    message = {"device": "not a regular file", "folder": "not a regular file",
               "binary": "not text", "huge": "larger than 1 MiB"}[kind]
    with pytest.raises(ConfigError, match=message):
        load_spec(path)


def test_an_accuracy_objective_on_synthetic_data_is_refused_before_any_run() -> None:
    raw = {"frameworks": ["pytorch"], "objectives": [{"metric": "accuracy",
                                                       "direction": "maximize"}],
           "fixed": {"model": "resnet50", "epochs": 0, "max_steps": 5},
           "search_space": {"dataset": {"type": "categorical",
                                        "choices": ["mnist5k", "synthetic_imagenet"]}}}
    with pytest.raises(ConfigError, match="accuracy is not measured on synthetic_imagenet"):
        parse_spec(raw)
    raw["objectives"] = [{"metric": "train_time", "direction": "minimize"}]
    assert parse_spec(raw).fixed["model"] == "resnet50"


def test_a_number_too_long_to_convert_is_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "long.yaml"
    spec.write_text("name: n\nframeworks: [pytorch]\nobjectives: [{metric: accuracy, "
                    f"direction: maximize}}]\nfixed: {{epochs: {'9' * 5000}}}\n")
    with pytest.raises(ConfigError, match="value has 5000 digits; write a shorter number"):
        load_spec(spec)
