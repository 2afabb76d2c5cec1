"""The console's ``best:`` lines: figures at 3 significant digits, and a warning first
where every run behind them was disturbed."""

from __future__ import annotations

import mlflow

from mlflow_dlaas.runs.schema import VALIDITY_TAG
from mlflow_dlaas.tuning.study_artifacts import best_lines


def _run(experiment_id: str, validity: str) -> str:
    client = mlflow.MlflowClient()
    run = client.create_run(experiment_id, tags={VALIDITY_TAG: validity})
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def test_best_lines_round_and_warn_when_every_run_was_disturbed(tracking: str) -> None:
    experiment = mlflow.MlflowClient().get_experiment_by_name(tracking).experiment_id
    disturbed = ",".join(_run(experiment, "disturbed") for _ in range(2))
    lines = best_lines([{"trial": 3, "inference_throughput": 9107.370789201646,
                         "mlflow_run_ids": disturbed}])
    assert lines[0].startswith("mlflow-dlaas: warning: every run behind the best trial was "
                               "disturbed")
    assert lines[1] == "best: trial=3, inference_throughput=9,110"
    quiet = f"{_run(experiment, 'valid')},{_run(experiment, 'disturbed')}"
    assert best_lines([{"trial": 1, "loss": 0.123456, "mlflow_run_ids": quiet}]) == [
        "best: trial=1, loss=0.123"]
