"""Run owners: a dead or reused PID on this host is proved dead; elsewhere nothing is proved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from mlflow_dlaas.store.ownership import (
    LAUNCHER_ENV,
    Owner,
    _start_token,
    launcher_environment,
    launchers_of,
    owner_tags,
)


@pytest.fixture
def me() -> Owner:
    owner = Owner.this_process()
    if not owner.start:
        pytest.skip("process start times are read from Linux's /proc")
    return owner


def test_this_process_is_alive_and_round_trips_through_tags(me: Owner) -> None:
    assert me.is_dead() is False
    assert Owner.from_tags(owner_tags()) == me
    assert Owner.from_tags({}) is None
    assert Owner.from_tags({**me.tags(), "dlaas.owner_pid": "x"}) is None


def test_a_gone_or_reused_pid_is_dead(me: Owner) -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child = replace(me, pid=process.pid, start=Owner.this_process().start)
    assert child.is_dead() is True  # alive, but another process than the one recorded
    process.kill()
    process.wait()
    assert replace(me, pid=process.pid).is_dead() is True


def test_a_zombie_is_dead(me: Owner) -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    alive = replace(me, pid=process.pid, start=_start_token(process.pid))
    assert alive.is_dead() is False
    process.kill()
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped yet
    assert alive.is_dead() is True
    process.wait()


def test_nothing_is_proved_about_another_host_or_boot(me: Owner) -> None:
    assert replace(me, host="elsewhere", pid=2**22 + 1).is_dead() is None
    ticks, _, _ = me.start.partition("@")
    assert replace(me, pid=2**22 + 1, start=f"{ticks}@another-boot/1").is_dead() is None
    assert replace(me, start="").is_dead() is None


def test_each_launcher_adds_itself_to_those_already_named(
        me: Owner, monkeypatch: pytest.MonkeyPatch) -> None:
    """A study driver names itself, then ``mlflow run`` between it and the entry point: the
    entry watches both."""
    driver = replace(me, pid=me.pid + 1)
    monkeypatch.setenv(LAUNCHER_ENV, json.dumps([driver.tags()]))
    named = launcher_environment()
    assert launchers_of(named) == [driver, me]
    assert launchers_of({LAUNCHER_ENV: "not json"}) == []
    assert launchers_of({}) == []
