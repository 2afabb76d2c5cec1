"""Trials whose worker stopped: failed at once when provably dead, retried in their own place,
their runs marked; nothing left RUNNING."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import mlflow
import optuna
import psutil
import pytest
from optuna.trial import TrialState

from mlflow_dlaas.measured_process.lifeline import StopSignals
from mlflow_dlaas.runs.schema import REASON_TAG
from mlflow_dlaas.store.ownership import Owner, _start_token, owner_tags
from mlflow_dlaas.tuning import recovery
from mlflow_dlaas.tuning import study as driver
from mlflow_dlaas.tuning.progress import next_step
from mlflow_dlaas.tuning.sampling import make_sampler
from mlflow_dlaas.tuning.spec import parse_spec
from mlflow_dlaas.tuning.telling import tell

X = {"x": optuna.distributions.IntDistribution(0, 9)}


def _dead_owner() -> Owner:
    """An owner on this host whose process has exited."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    owner = Owner(Owner.this_process().host, process.pid, _token(process.pid))
    process.kill()
    process.wait()
    return owner


def _token(pid: int) -> str:
    token = _start_token(pid)
    if token is None:
        pytest.skip("process start times are read from Linux's /proc")
    return token


def _running_trial(study: optuna.Study, owner: dict | None, beat: float) -> optuna.Trial:
    trial = study.ask(X)
    if owner is not None:
        trial.set_user_attr(recovery.OWNER_ATTR, owner)
    trial.set_user_attr(recovery.HEARTBEAT_ATTR, beat)
    return trial


def _new_run(tracking: str) -> str:
    experiment_id = mlflow.get_experiment_by_name(tracking).experiment_id
    return mlflow.MlflowClient().create_run(experiment_id).info.run_id


def test_a_provably_dead_worker_is_given_up_at_once_and_retried(tracking: str) -> None:
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage())
    lost = _running_trial(study, _dead_owner().tags(), beat=time.time())  # fresh heartbeat
    run_id = _new_run(tracking)
    lost.set_user_attr(recovery.RUN_IDS_ATTR, [run_id])
    alive = _running_trial(study, owner_tags(), beat=time.time() - 3600)  # alive: no beat needed

    recovery.recover_stale_trials(study)

    trials = study.get_trials()
    assert trials[lost.number].state == TrialState.FAIL
    assert "is gone" in trials[lost.number].user_attrs[recovery.REASON_ATTR]
    assert not recovery.counts(trials[lost.number])
    assert trials[alive.number].state == TrialState.RUNNING
    (retry,) = study.get_trials(states=(TrialState.WAITING,))
    assert retry.system_attrs["fixed_params"] == trials[lost.number].params  # replayed on ask
    assert retry.user_attrs[recovery.RETRY_OF_ATTR] == lost.number
    run = mlflow.MlflowClient().get_run(run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags[recovery.ORPHANED_TAG] == "true"
    assert "is gone" in run.data.tags[REASON_TAG]

    recovery.recover_stale_trials(study)  # idempotent: nothing more to do
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 1


def test_other_hosts_keep_the_heartbeat_rule(tracking: str) -> None:
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage())
    elsewhere = {**owner_tags(), "dlaas.owner_host": "another-host"}
    silent = _running_trial(study, elsewhere, beat=time.time() - recovery.STALE_AFTER_S - 1)
    beating = _running_trial(study, elsewhere, beat=time.time())
    unowned = _running_trial(study, None, beat=time.time() - recovery.STALE_AFTER_S - 1)

    recovery.recover_stale_trials(study)

    trials = study.get_trials()
    assert trials[silent.number].state == TrialState.FAIL
    assert "no heartbeat" in trials[silent.number].user_attrs[recovery.REASON_ATTR]
    assert trials[beating.number].state == TrialState.RUNNING
    assert trials[unowned.number].state == TrialState.FAIL


def test_an_orphaned_process_on_this_host_is_stopped_and_its_run_ended(tracking: str) -> None:
    client = mlflow.MlflowClient()
    running, finished = _new_run(tracking), _new_run(tracking)
    client.set_terminated(finished, "FINISHED")
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        client.log_batch(running, tags=[mlflow.entities.RunTag(k, v) for k, v in
                                        Owner(Owner.this_process().host, process.pid,
                                              _token(process.pid)).tags().items()])
        recovery.orphan_runs([running, finished], "its worker is gone")
        assert not psutil.pid_exists(process.pid)  # stopped (and reaped by psutil)
    finally:
        process.kill()
    assert client.get_run(running).info.status == "KILLED"
    assert client.get_run(finished).info.status == "FINISHED"  # measured, but left out
    for run_id in (running, finished):
        assert client.get_run(run_id).data.tags[recovery.ORPHANED_TAG] == "true"


def test_a_grid_retry_takes_its_failed_trials_place(tracking: str) -> None:
    """Grid of 3: point A was given up; its retry measures A, the loop then measures the
    rest, and stops when every point counts, failed attempts not counted."""
    spec = parse_spec({"name": "g", "frameworks": ["pytorch"], "sampler": "grid", "seed": 1,
                       "n_trials": 3, "search_space": {"batch_size": [8, 16, 32]},
                       "objectives": [{"metric": "accuracy", "direction": "maximize"}]})
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage(),
                                sampler=make_sampler(spec), direction="maximize")
    lost = study.ask()
    lost.suggest_categorical("batch_size", [8, 16, 32])
    lost.set_user_attr(recovery.OWNER_ATTR, _dead_owner().tags())
    recovery.recover_stale_trials(study)
    measured = []
    started = time.monotonic()
    while (step := next_step(study, spec, started)) == "ask":
        trial = study.ask()
        measured.append(trial.suggest_categorical("batch_size", [8, 16, 32]))
        tell(study, trial, StopSignals(), [1.0])
    assert step == "done"
    assert sorted(measured) == [8, 16, 32] and measured[0] == lost.params["batch_size"]
    assert sum(recovery.counts(t) for t in study.get_trials()) == 3


def test_a_trial_stopped_inside_ask_is_failed_and_its_grid_point_measured(
        tracking: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stop inside Optuna's ask() leaves a RUNNING trial with a grid point but no
    parameters and no owner: recognised, failed with its reason, and its point measured
    (enqueueing it as it was would make the grid sampler refuse every rerun)."""
    spec = parse_spec({"name": "w", "frameworks": ["pytorch"], "sampler": "grid", "seed": 1,
                       "search_space": {"batch_size": [32, 64]},
                       "objectives": [{"metric": "accuracy", "direction": "maximize"}]})
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage(),
                                sampler=make_sampler(spec), direction="maximize")
    wedged = study.ask()  # the driver stopped here: a grid point, nothing else
    assert not wedged.params and "dlaas_grid_point" in study.get_trials()[0].system_attrs
    recovery.recover_stale_trials(study)
    assert study.get_trials()[0].state == TrialState.RUNNING  # its worker may record itself yet
    monkeypatch.setattr(recovery, "OWNERLESS_AFTER_S", 0.0)
    recovery.recover_stale_trials(study)
    failed = study.get_trials()[0]
    assert failed.state == TrialState.FAIL
    assert "before the trial was under way" in failed.user_attrs[recovery.REASON_ATTR]
    measured = []
    started = time.monotonic()
    while (step := next_step(study, spec, started)) == "ask":
        trial = study.ask()
        measured.append(trial.suggest_categorical("batch_size", [32, 64]))
        tell(study, trial, StopSignals(), [1.0])
    assert step == "done" and sorted(measured) == [32, 64]


def test_a_resumed_seeded_study_does_not_draw_its_first_settings_again(tracking: str) -> None:
    spec = parse_spec({"name": f"seeded-{time.time_ns()}", "frameworks": ["pytorch"],
                       "sampler": "random", "seed": 3, "n_trials": 3,
                       "search_space": {"learning_rate": {"type": "float", "low": 0.001,
                                                          "high": 0.1, "log": True}},
                       "objectives": [{"metric": "accuracy", "direction": "maximize"}]})
    storage = optuna.storages.InMemoryStorage()
    drawn = []
    for runs in (2, 1):  # n_trials 2, then resumed to 3
        study, _ = driver._create_or_load(spec, storage)
        for _ in range(runs):
            trial = study.ask()
            drawn.append(trial.suggest_float("learning_rate", 0.001, 0.1, log=True))
            study.tell(trial, 0.5)
    assert len(set(drawn)) == 3, drawn
    again, _ = driver._create_or_load(spec, optuna.storages.InMemoryStorage())
    assert again.ask().suggest_float("learning_rate", 0.001, 0.1, log=True) == drawn[0]


def _child_started_by_its_entry(name: str, driver_pid: int, timeout_s: float = 120) -> str:
    """Wait until a child run of ``name`` is RUNNING and its entry point has taken it over."""
    client = mlflow.MlflowClient()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        experiment = client.get_experiment_by_name(name)
        if experiment is not None:
            for run in client.search_runs([experiment.experiment_id],
                                          "attributes.status = 'RUNNING'"):
                owner = Owner.from_tags(run.data.tags)
                if run.data.tags.get("dlaas.role") == "trial" and owner and \
                        owner.pid != driver_pid:
                    return run.info.run_id
        time.sleep(0.2)
    raise AssertionError(f"no child run of {name} started within {timeout_s} s")


@pytest.mark.slow
def test_sigterm_then_sigkill_to_the_driver_then_resume_measures_every_point_once(
    cli_path: str, tracking: str, tmp_path: Path
) -> None:
    pytest.importorskip("torch", reason="the study tests train with PyTorch (extra: torch)")
    import signal

    from mlflow_dlaas.report.collect import collect_runs
    from tests.tuning.studies import study_cli, study_runs, write_spec

    name = f"stopped-{time.time_ns() % 10**8}"
    spec = write_spec(tmp_path, name=name, sampler="grid", n_trials=2,
                      search_space={"batch_size": [16, 32]},
                      fixed={"model": "mlp", "dataset": "digits", "epochs": 1,
                             "warmup_steps": 0, "log_model": "false"})
    client = mlflow.MlflowClient()

    driver = study_cli(cli_path, spec, wait=False)
    stopped_run = _child_started_by_its_entry(name, driver.pid)
    signalled = time.monotonic()
    driver.send_signal(signal.SIGTERM)
    output = driver.communicate(timeout=60)[0]
    assert time.monotonic() - signalled < 20, output[-3000:]
    assert driver.returncode == 128 + signal.SIGTERM, output[-3000:]
    (parent,), children = study_runs(name)
    assert parent.info.status == "KILLED"
    assert "SIGTERM" in parent.data.tags[REASON_TAG]
    assert [c.info.status for c in children] == ["KILLED"]
    assert "SIGTERM" in client.get_run(stopped_run).data.tags[REASON_TAG]

    driver = study_cli(cli_path, spec, wait=False)
    orphan_run = _child_started_by_its_entry(name, driver.pid)
    driver.kill()
    driver.wait()

    out = study_cli(cli_path, spec, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    # the dead driver's trial is given up because its owner is gone, not after its heartbeat
    # went stale (a minute): said on the console, not timed (a busy machine is slow anyway)
    assert "is gone" in out.stderr, out.stderr[-3000:]
    assert "no heartbeat" not in out.stderr, out.stderr[-3000:]
    (parent,), children = study_runs(name)
    assert parent.info.status == "FINISHED" and REASON_TAG not in parent.data.tags
    assert all(c.info.status != "RUNNING" for c in children)
    orphaned = {c.info.run_id for c in children if c.data.tags.get(recovery.ORPHANED_TAG)}
    assert {stopped_run, orphan_run} <= orphaned
    measured = sorted(c.data.params["batch_size"] for c in children
                      if c.info.status == "FINISHED" and c.info.run_id not in orphaned)
    assert measured == ["16", "32"]
    replicates = collect_runs(client, study=name).finished
    assert sorted(replicates["params.batch_size"]) == ["16", "32"]
    trials = optuna.load_study(study_name=name,
                               storage=f"sqlite:///{Path.cwd() / 'optuna.db'}").trials
    assert sorted(t.params["batch_size"] for t in trials if t.state == TrialState.COMPLETE) \
        == [16, 32]
    assert all(t.state != TrialState.RUNNING for t in trials)
