"""`mlflow-dlaas study` end to end: child runs, failures, resume, bad specs."""

from __future__ import annotations

import re
from pathlib import Path

import mlflow
import optuna
import pytest

from tests.tuning.studies import (
    CHEAP_FIXED,
    needs_torch,  # noqa: F401 - the fixture, used by name
    study_cli,
    study_name,
    study_runs,
    write_spec,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_torch")]


def test_trials_are_child_runs_and_the_study_resumes(
    cli_path: str, tracking: str, tmp_path: Path
) -> None:
    name = study_name()
    spec = write_spec(tmp_path, name=name, n_trials=2, seed=1,
                      search_space={"batch_size": [16, 32]})
    out = study_cli(cli_path, spec)
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(r"^\[2/2\] trial 1 COMPLETE \[batch_size=(16|32)\]: Headline/test_accuracy "
                     r"0\.\d+, best ",
                     out.stderr, re.MULTILINE), out.stderr[-3000:]
    (parent,), children = study_runs(name)
    assert parent.info.status == "FINISHED" and len(children) == 2
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert {c.info.status for c in children} == {"FINISHED"}
    assert all(c.data.params["batch_size"] in ("16", "32") for c in children)
    client = mlflow.MlflowClient()
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "study")}
    assert {"study/trials.csv", "study/best_trial.csv",
            "study/optimization_history.png"} <= artifacts
    assert parent.data.metrics["trials_complete"] == 2

    # the same command with a larger budget continues the same study and parent run
    spec = write_spec(tmp_path, name=name, n_trials=3, seed=1,
                      search_space={"batch_size": [16, 32]})
    out = study_cli(cli_path, spec)
    assert out.returncode == 0, out.stderr[-3000:]
    (again,), children = study_runs(name)
    assert again.info.run_id == parent.info.run_id and again.info.status == "FINISHED"
    assert len(children) == 3
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{Path.cwd() / 'optuna.db'}")
    assert [t.number for t in study.trials] == [0, 1, 2]


def test_an_inference_study_searches_threads_in_a_named_experiment(
    cli_path: str, tracking: str, tmp_path: Path
) -> None:
    name = study_name()
    spec = write_spec(
        tmp_path, name=name, experiment=f"{name}-runs", frameworks=["onnxruntime"],
        entry_point="infer", sampler="grid", n_trials=2,
        fixed={"model": "lenet5", "batch_sizes": "4", "scenarios": "single_stream",
               "min_query_count": 20, "min_duration_s": 0.1},
        search_space={"intra_op_threads": [1, 2]},
        objectives=[{"metric": "p99_latency", "direction": "minimize"}])
    out = study_cli(cli_path, spec)
    assert out.returncode == 0, out.stderr[-3000:]
    assert mlflow.MlflowClient().get_experiment_by_name(name) is None
    (parent,), children = study_runs(f"{name}-runs")
    assert {c.info.status for c in children} == {"FINISHED"}
    assert sorted(c.data.params["in_force_intra_op_threads"] for c in children) == ["1", "2"]
    best = min(children, key=lambda c: c.data.metrics["single_stream/batch_4/latency_p99_ms"])
    assert parent.data.tags["dlaas.best_run_ids"] == best.info.run_id


def test_failed_and_timed_out_trials_are_recorded_and_the_study_goes_on(
    cli_path: str, tracking: str, tmp_path: Path
) -> None:
    name = study_name()
    # a valid spec (a bad value is refused before launch) whose mnist trial fails: no data_dir
    spec = write_spec(tmp_path, name=name, sampler="grid", n_trials=2,
                      fixed={k: v for k, v in CHEAP_FIXED.items() if k != "dataset"},
                      search_space={"dataset": ["mnist", "digits"]})
    out = study_cli(cli_path, spec)
    assert out.returncode == 0, out.stderr[-3000:]
    parents, children = study_runs(name)
    by_dataset = {c.data.params["dataset"]: c for c in children}
    assert by_dataset["mnist"].info.status == "FAILED"
    assert "pass data_dir" in by_dataset["mnist"].data.tags["dlaas.failure_reason"]
    assert by_dataset["digits"].info.status == "FINISHED"
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{Path.cwd() / 'optuna.db'}")
    states = {t.params["dataset"]: t.state.name for t in study.trials}
    assert states == {"mnist": "FAIL", "digits": "COMPLETE"}
    # said once, in our words: no Optuna "[W ...] Trial 0 failed" line beside ours
    assert not [line for line in out.stderr.splitlines() if line.startswith("[W ")], out.stderr
    assert any("failed: " in line and "pass data_dir" in line
               for line in out.stderr.splitlines()), out.stderr[-3000:]

    # a study in which no trial completed has no result: it fails, with the reasons counted
    slow = study_name()
    spec = write_spec(tmp_path, name=slow, n_trials=1, trial_timeout_s=1)  # a trial takes ~3 s
    out = study_cli(cli_path, spec)
    assert out.returncode == 1, out.stderr[-3000:]
    assert out.stderr.rstrip().endswith(
        f"error: study '{slow}': 0 of 1 trials completed: 1 failed (timed out after 1 s)")
    (parent,), (child,) = study_runs(slow)
    assert child.info.status == "FAILED"
    assert "timed out after 1 s" in child.data.tags["dlaas.failure_reason"]
    assert parent.info.status == "FAILED"
    assert parent.data.tags["dlaas.failure_reason"] == \
        "0 of 1 trials completed: 1 failed (timed out after 1 s)"


def test_a_bad_spec_exits_2_and_launches_nothing(
    cli_path: str, tracking: str, tmp_path: Path
) -> None:
    name = study_name()
    spec = write_spec(tmp_path, name=name, sampler="annealing")
    out = study_cli(cli_path, spec)
    assert out.returncode == 2
    assert "sampler: 'annealing' is not one of" in out.stderr
    assert mlflow.MlflowClient().get_experiment_by_name(name) is None
    assert not (Path.cwd() / "optuna.db").exists() or name not in optuna.get_all_study_names(
        f"sqlite:///{Path.cwd() / 'optuna.db'}")


def test_a_hopeless_trial_is_pruned_before_its_next_epoch(
    cli_path: str, tracking: str, tmp_path: Path
) -> None:
    name = study_name()
    # the grid in the spec's order: 0.05, 0.03, then the hopeless 1e-6 (after the 2 startup
    # trials)
    spec = write_spec(tmp_path, name=name, sampler="grid", seed=3, pruner="median",
                      n_trials=3, search_space={"learning_rate": [0.05, 0.03, 1e-6]},
                      fixed={"model": "mlp", "dataset": "digits", "epochs": 4,
                             "batch_size": 32, "warmup_steps": 0, "log_model": "false"})
    out = study_cli(cli_path, spec)
    assert out.returncode == 0, out.stderr[-3000:]
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{Path.cwd() / 'optuna.db'}")
    states = {t.params["learning_rate"]: t.state.name for t in study.trials}
    assert states == {0.05: "COMPLETE", 0.03: "COMPLETE", 1e-6: "PRUNED"}
    # the trials reported every epoch to Optuna themselves; the pruned one only its first
    steps = {t.params["learning_rate"]: sorted(t.intermediate_values) for t in study.trials}
    assert steps == {0.05: [1, 2, 3, 4], 0.03: [1, 2, 3, 4], 1e-6: [1]}
    _, children = study_runs(name)
    pruned = next(c for c in children if c.data.params["learning_rate"] == "1e-06")
    assert pruned.info.status == "KILLED" and pruned.data.tags["dlaas.pruned"] == "true"
    assert "pruned after epoch 1 by the study's median pruner (test_accuracy" in \
        pruned.data.tags["dlaas.failure_reason"]
    # stopped before its second epoch: one epoch's metrics, no final figures
    history = mlflow.MlflowClient().get_metric_history(pruned.info.run_id, "test_accuracy")
    assert [m.step for m in history] == [1]
    assert "Headline/test_accuracy" not in pruned.data.metrics
    # where the trial lives travelled in the environment, not in params or tags
    for child in children:
        assert not any("optuna.db" in v for v in [*child.data.params.values(),
                                                *child.data.tags.values()])
