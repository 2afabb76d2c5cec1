"""A worker says once that its trial runs on this machine beside another worker's."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import optuna
import pytest

from mlflow_dlaas.store.ownership import Owner, _start_token
from mlflow_dlaas.tuning.recovery import OWNER_ATTR
from mlflow_dlaas.tuning.shared_machine import SharedMachineNotice, trials_beside

X = {"x": optuna.distributions.IntDistribution(0, 9)}


@pytest.fixture
def other_worker() -> Iterator[Owner]:
    """A live process on this host, standing for another worker of the study."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    token = _start_token(process.pid)
    if token is None:
        process.kill()
        pytest.skip("process start times are read from Linux's /proc")
    yield Owner(Owner.this_process().host, process.pid, token)
    process.kill()
    process.wait()


def _running(study: optuna.Study, owner: Owner) -> optuna.Trial:
    trial = study.ask(X)
    trial.set_user_attr(OWNER_ATTR, owner.tags())
    return trial


def test_a_live_worker_on_this_host_is_named_once(
        other_worker: Owner, capsys: pytest.CaptureFixture[str]) -> None:
    study = optuna.create_study()
    theirs = _running(study, other_worker)
    mine = _running(study, Owner.this_process())
    notice = SharedMachineNotice()
    notice.check(study, mine.number)
    err = capsys.readouterr().err
    assert f"warning: trial {mine.number} runs on this machine beside trial {theirs.number} " \
           f"(process {other_worker.pid} on " in err
    assert "omp_wait_policy" in err
    notice.check(study, _running(study, Owner.this_process()).number)
    assert capsys.readouterr().err == ""  # said once per worker


def test_dead_other_host_and_finished_workers_are_not_named(other_worker: Owner) -> None:
    study = optuna.create_study()
    elsewhere = Owner("another-host", other_worker.pid, other_worker.start)
    _running(study, elsewhere)
    finished = _running(study, other_worker)
    study.tell(finished, 1.0)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _running(study, Owner(other_worker.host, gone.pid, other_worker.start))
    mine = _running(study, Owner.this_process())
    assert trials_beside(study, mine.number) == []
