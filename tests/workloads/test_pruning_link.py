"""Pruning from inside the trial: the entry reports each epoch to the Optuna storage and the
worker waits for go / stop, so that a pruned trial never starts its next epoch."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import mlflow
import optuna
import pytest

from mlflow_dlaas.measured_process.channel import Checkpoints, decode
from mlflow_dlaas.measured_process.start import StartedWorker, WorkerLaunch
from mlflow_dlaas.optuna_access import internals
from mlflow_dlaas.optuna_access.pruning_request import PRUNING_ENV, PruningRequest
from mlflow_dlaas.optuna_access.storage import absolute_url
from mlflow_dlaas.runs.schema import PRUNED_TAG
from mlflow_dlaas.workloads.pruning_link import PruningLink

ROOT = Path(__file__).resolve().parents[2]


def _study_with_two_good_trials(url: str) -> optuna.Study:
    study = optuna.create_study(study_name="pruned", storage=url, direction="maximize",
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=2,
                                                                   n_warmup_steps=1))
    for _ in range(2):
        trial = study.ask()
        for step in (1, 2, 3):
            trial.report(0.8 + step / 100, step)
        study.tell(trial, 0.83)
    return study


def test_the_entry_reports_to_the_trial_and_learns_the_decision_at_once(
    tracking: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = absolute_url(f"sqlite:///{tmp_path / 'optuna.db'}")
    study = _study_with_two_good_trials(url)
    good, hopeless = study.ask(), study.ask()
    for trial, accuracy, expected in ((good, 0.9, None), (hopeless, 0.1, "pruned")):
        monkeypatch.setenv(PRUNING_ENV, PruningRequest(
            storage=url, study="pruned", trial_id=internals.trial_id(trial),
            pruner="median", metric="test_accuracy").environment()[PRUNING_ENV])
        link = PruningLink.from_environment()
        assert PRUNING_ENV not in os.environ  # the worker, started next, never sees it
        with mlflow.start_run() as run:
            assert link.check(1, {"train_loss": 2.0}) is None  # not the pruned-on metric
            reason = link.check(1, {"test_accuracy": accuracy})
        tags = mlflow.get_run(run.info.run_id).data.tags
        if expected is None:
            assert reason is None and PRUNED_TAG not in tags
        else:
            assert reason == ("pruned after epoch 1 by the study's median pruner "
                              "(test_accuracy 0.1)")
            assert tags[PRUNED_TAG] == "true"
        kept = internals.storage_of(study).get_trial(internals.trial_id(trial))
        assert kept.intermediate_values == {1: accuracy}
    assert PruningLink.from_environment() is None


def test_a_worker_told_to_stop_does_not_start_the_next_epoch(tmp_path: Path) -> None:
    worker = textwrap.dedent("""
        from mlflow_dlaas.measured_process.channel import StopRequested, WorkerChannel
        channel = WorkerChannel()
        try:
            for epoch in range(1, 6):
                print("epoch", epoch, "started", flush=True)
                channel.metrics({"test_accuracy": epoch / 10}, step=epoch)
                channel.checkpoint(epoch)
        except StopRequested as e:
            print(e, flush=True)
    """)
    (tmp_path / "stop_worker.py").write_text(worker)
    decide = lambda step, metrics: "enough" if step == 2 else None  # noqa: E731
    launch = WorkerLaunch(module="stop_worker", config={}, cpu_affinity=None,
                          environment={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
                          measured_phases=(), headline_phases=(), monitor_interval_s=0.1,
                          stall_timeout_s=30, checkpoint=decide)
    seen = []
    with StartedWorker(launch) as started:
        checkpoints = Checkpoints(decide, started.answer)
        with os.fdopen(started.take_reports()) as lines:
            for line in lines:
                message = decode(line)
                checkpoints.saw(message)
                seen.append((message.kind, message.body.get("step")))
        out = started.proc.communicate(timeout=30)[0].decode()
    assert checkpoints.stop_reason == "enough"
    assert out.splitlines() == ["epoch 1 started", "epoch 2 started",
                                "stopped after epoch 2: the entry process asked (stop)"]
    assert seen == [("metrics", 1), ("checkpoint", 1), ("metrics", 2), ("checkpoint", 2)]
