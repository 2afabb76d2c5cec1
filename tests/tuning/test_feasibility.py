"""Constraints where Optuna and optuna-dashboard read them; best = best feasible; run links;
the one line a study with no completed trial ends with."""

from __future__ import annotations

import optuna
import pytest
from optuna.study._constrained_optimization import _CONSTRAINTS_KEY
from optuna.trial import TrialState, create_trial

from mlflow_dlaas.measured_process.lifeline import StopSignals
from mlflow_dlaas.optuna_access import internals
from mlflow_dlaas.runs import ui_links as run_links
from mlflow_dlaas.tuning import feasibility
from mlflow_dlaas.tuning.outcome import no_completion_reason
from mlflow_dlaas.tuning.recovery import GIVEN_UP_ATTR, REASON_ATTR
from mlflow_dlaas.tuning.sampling import make_sampler, suggest
from mlflow_dlaas.tuning.spec import parse_spec
from mlflow_dlaas.tuning.telling import tell

X = {"x": optuna.distributions.IntDistribution(0, 9)}


def _spec(sampler: str, **extra: object):
    return parse_spec({"name": "s", "frameworks": ["pytorch"], "sampler": sampler,
                       "fixed": {"epochs": 1},
                       "search_space": {"batch_size": [8, 24, 40, 56]},
                       "objectives": [{"metric": "train_time", "direction": "minimize"}],
                       "constraints": [{"metric": "accuracy", "op": ">=", "value": 0.9}],
                       **extra})


@pytest.mark.parametrize("sampler", ["tpe", "gp", "random", "grid", "nsga2"])
def test_every_sampler_sees_the_constraints_and_best_is_the_best_feasible(sampler: str) -> None:
    spec = _spec(sampler)
    study = optuna.create_study(direction="minimize", sampler=make_sampler(spec))
    # x is the train time; accuracy rises with it: the fastest trials miss accuracy >= 0.9
    for batch_size in (8, 24, 40, 56):
        if sampler != "grid":
            study.enqueue_trial({"batch_size": batch_size})
        trial = study.ask()
        x = suggest(trial, spec)["batch_size"] / 8
        accuracy = x / 6
        feasibility.record_constraints(study, internals.trial_id(trial),
                                       [c.violation(accuracy) for c in spec.constraints])
        # the last grid point stops the study: told all the same
        tell(study, trial, StopSignals(), [x])
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    # where every sampler (FrozenTrial.constraints) and optuna-dashboard (the list) read them
    assert all(t.constraints == {"0": pytest.approx(max(0.0, 0.9 - t.values[0] / 6))}
               for t in complete)
    assert all(isinstance(t.system_attrs[_CONSTRAINTS_KEY], list) for t in complete)
    assert all(t.user_attrs[feasibility.FEASIBLE_ATTR] == (t.values[0] / 6 >= 0.9)
               for t in complete)
    (best,) = feasibility.best_trials(study, spec)
    assert best.values[0] == min(t.values[0] for t in complete if t.values[0] / 6 >= 0.9)
    assert study.best_trial.number == best.number  # Optuna itself agrees


def test_with_no_feasible_trial_none_is_best_and_the_closest_is_named() -> None:
    spec = _spec("random")
    study = optuna.create_study(direction="minimize")
    for accuracy in (0.5, 0.8):
        trial = study.ask(X)
        feasibility.record_constraints(study, internals.trial_id(trial),
                                       [c.violation(accuracy) for c in spec.constraints])
        study.tell(trial, 1.0)
    assert feasibility.best_trials(study, spec) == []
    closest = feasibility.closest_infeasible(study)
    assert closest.number == 1
    assert feasibility.describe_violations(spec.constraints, closest) == \
        "Headline/test_accuracy >= 0.9 missed by 0.1"


def test_a_resumed_study_reads_the_values_its_trials_were_given_before() -> None:
    study = optuna.create_study(direction="minimize")
    trial = study.ask(X)
    trial.set_user_attr(feasibility.LEGACY_ATTR, [0.2])
    study.tell(trial, 1.0)
    assert feasibility.violations(study.trials[0]) == [0.2]
    assert not feasibility.is_feasible(study.trials[0])


@pytest.mark.parametrize(("uri", "url"), [
    ("http://alice:secret@tracking.example:5000/mlflow/?token=x",
     "http://tracking.example:5000/mlflow"),
    ("https://tracking.example", "https://tracking.example"),
    ("sqlite:////tmp/mlflow.db", "http://127.0.0.1:5000"),
])
def test_a_run_link_points_at_the_ui_without_credentials(
    uri: str, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(run_links.UI_URL_ENV, raising=False)
    monkeypatch.setattr("mlflow.get_tracking_uri", lambda: uri)
    assert run_links.run_url("3", "abc") == \
        f"{url}/#/experiments/3/runs/abc?workflowType=machine_learning"
    monkeypatch.setenv(run_links.UI_URL_ENV, "http://ui.example:8080/")
    assert run_links.ui_base_url() == "http://ui.example:8080"


def _ended(state: TrialState, reason: str = "", **attrs: object) -> optuna.trial.FrozenTrial:
    values = [1.0] if state == TrialState.COMPLETE else None
    return create_trial(state=state, values=values,
                        user_attrs={REASON_ATTR: reason, **attrs} if reason else attrs)


def test_no_completed_trial_is_said_with_the_reasons_counted() -> None:
    bad = "ConfigError: dataset mnist: pass data_dir\nmore detail"
    trials = [_ended(TrialState.FAIL, bad), _ended(TrialState.FAIL, bad),
              _ended(TrialState.FAIL, "timed out after 3 s"), _ended(TrialState.PRUNED),
              _ended(TrialState.FAIL, "the study worker stopped", **{GIVEN_UP_ATTR: True})]
    assert no_completion_reason(trials) == (
        "0 of 4 trials completed: 3 failed (2x ConfigError: dataset mnist: pass data_dir; "
        "timed out after 3 s), 1 pruned")
    assert no_completion_reason([*trials, _ended(TrialState.COMPLETE)]) is None
    assert no_completion_reason([]) is None
