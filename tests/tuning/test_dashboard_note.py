"""A trial's note for optuna-dashboard: run links, settings, objectives, constraints."""

from __future__ import annotations

from mlflow_dlaas.tuning.dashboard_note import trial_note
from mlflow_dlaas.tuning.spec import parse_spec


def test_the_note_links_the_runs_and_says_which_constraint_was_missed() -> None:
    spec = parse_spec({
        "name": "n", "frameworks": ["pytorch"], "search_space": {"batch_size": [16, 32]},
        "objectives": [{"metric": "train_time", "direction": "minimize"}],
        "constraints": [{"metric": "accuracy", "op": ">=", "value": 0.9},
                        {"metric": "peak_memory", "op": "<=", "value": "1GB"}]})
    note = trial_note(spec, {"batch_size": 32, "epochs": 1},
                      [("0123456789abcdef", "http://ui:5000/#/experiments/1/runs/0123456789abcdef")],
                      [1.5], [0.85, 500.0])
    assert "**MLflow runs**: [01234567](http://ui:5000/#/experiments/1/runs/0123456789abcdef)" \
        in note
    assert "`batch_size=32`, `epochs=1`" in note
    assert "Headline/train_time_seconds (minimize) 1.5" in note
    assert "- Headline/test_accuracy >= 0.9: 0.85, **missed by 0.05**" in note
    assert "Headline/peak_memory_megabytes <= 1000: 500, **met**" in note
