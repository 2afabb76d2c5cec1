"""What a study reports, end to end: the best feasible trial everywhere, links and names for
optuna-dashboard, and no best trial when none is feasible."""

from __future__ import annotations

import csv
import io
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


def _load(name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{Path.cwd() / 'optuna.db'}")


def _csv(run_id: str, path: str) -> list[dict[str, str]]:
    text = mlflow.artifacts.load_text(f"runs:/{run_id}/{path}")
    return list(csv.DictReader(io.StringIO(text)))


def test_a_constraint_the_fastest_trial_breaks_makes_the_feasible_one_best(
    cli_path: str, tracking: str, tmp_path: Path
) -> None:
    name = study_name()
    # one step trains fastest and learns nothing; 60 steps reach the accuracy asked for.
    # A warm-up step keeps PyTorch's first-step cost (0.3 s, CI measured it) out of both times.
    spec = write_spec(tmp_path, name=name, sampler="grid", n_trials=2,
                      fixed={**{k: v for k, v in CHEAP_FIXED.items() if k != "max_steps"},
                             "epochs": 5, "batch_size": 32, "warmup_steps": 1},
                      search_space={"max_steps": [1, 60]},
                      objectives=[{"metric": "train_time", "direction": "minimize"}],
                      constraints=[{"metric": "accuracy", "op": ">=", "value": 0.5}])
    out = study_cli(cli_path, spec)
    assert out.returncode == 0, out.stderr[-3000:]
    (parent,), children = study_runs(name)
    by_steps = {c.data.params["max_steps"]: c for c in children}
    fast, good = by_steps["1"], by_steps["60"]
    time, accuracy = "Headline/train_time_seconds", "Headline/test_accuracy"
    assert fast.data.metrics[time] < good.data.metrics[time]
    assert fast.data.metrics[accuracy] < 0.5 <= good.data.metrics[accuracy]

    study = _load(name)
    best_number = next(t.number for t in study.trials if t.params["max_steps"] == 60)
    # the parent run: metric, tags, table
    assert parent.data.metrics["Headline/best_train_time_seconds"] == pytest.approx(
        good.data.metrics["Headline/train_time_seconds"])
    assert parent.data.tags["dlaas.best_trial"] == str(best_number)
    assert parent.data.tags["dlaas.best_run_ids"] == good.info.run_id
    assert parent.data.metrics["trials_feasible"] == 1
    (row,) = _csv(parent.info.run_id, "study/best_trial.csv")
    assert row["trial"] == str(best_number) and row["feasible"] == "True"
    (last,) = [line for line in out.stderr.splitlines() if line.startswith("[2/2]")]
    assert f"(trial {best_number})" in last
    assert f"best: trial={best_number}," in out.stdout
    # Optuna and optuna-dashboard: constraints, names, links
    assert study.best_trial.number == best_number
    assert study.metric_names == ["Headline/train_time_seconds"]
    for trial in study.trials:
        run = fast if trial.params["max_steps"] == 1 else good
        assert trial.system_attrs["constraints"] == [pytest.approx(
            max(0.0, 0.5 - run.data.metrics["Headline/test_accuracy"]))]
        assert trial.user_attrs["feasible"] == (run is good)
        assert trial.user_attrs["mlflow_run_id"] == run.info.run_id
        assert trial.user_attrs["mlflow_run_url"] == (
            f"http://127.0.0.1:5000/#/experiments/{run.info.experiment_id}/runs/"
            f"{run.info.run_id}?workflowType=machine_learning")


def test_with_no_feasible_trial_none_is_named_best_and_the_closest_is_said(
    cli_path: str, tracking: str, tmp_path: Path
) -> None:
    name = study_name()
    spec = write_spec(tmp_path, name=name, n_trials=1,
                      constraints=[{"metric": "accuracy", "op": ">=", "value": 1.5}])
    out = study_cli(cli_path, spec)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "no trial met the constraints, so none is named best; the closest was trial 0 " \
           "(Headline/test_accuracy >= 1.5 missed by" in out.stderr
    assert re.search(r"\[1/1\] trial 0 COMPLETE( \[[^]]+\])?: Headline/test_accuracy 0\.",
                     out.stderr), out.stderr[-3000:]
    assert "(infeasible: Headline/test_accuracy >= 1.5 missed by" in out.stderr
    assert "best:" not in out.stdout
    (parent,), _ = study_runs(name)
    assert not any("best_" in k for k in parent.data.metrics)
    assert parent.data.tags["dlaas.best_trial"].startswith("none")
    assert parent.data.tags["dlaas.closest_trial"] == "0"
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(parent.info.run_id,
                                                                      "study")}
    assert "study/best_trial.csv" not in artifacts
    assert _csv(parent.info.run_id, "study/closest_trial.csv")[0]["feasible"] == "False"
    assert _load(name).user_attrs["best_feasible_trial"].startswith("none")
