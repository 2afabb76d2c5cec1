"""A run MLflow named at random is renamed after what it measured; a person's name is kept."""

from __future__ import annotations

import mlflow
import pytest

from mlflow_dlaas.run_description import name_active_run


@pytest.mark.parametrize("made_up", ["ambitious-snipe-0", "ambitious-snipe-42",
                                     "ambitious-snipe-1000"])  # randint(0, 10**3): 1000 too
def test_a_name_mlflow_made_up_is_replaced(tracking: str, made_up: str) -> None:
    with mlflow.start_run(run_name=made_up) as run:
        name_active_run("pytorch-lenet5-bs64")
    assert mlflow.get_run(run.info.run_id).info.run_name == "pytorch-lenet5-bs64"


def test_a_persons_name_is_kept(tracking: str) -> None:
    with mlflow.start_run(run_name="baseline for the paper") as run:
        name_active_run("pytorch-lenet5-bs64")
    assert mlflow.get_run(run.info.run_id).info.run_name == "baseline for the paper"
