"""Stop signals are never lost: dropped stops land at the next safe point, a store write is
not cut in half, and a second signal stops at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import weakref

import pytest

from mlflow_dlaas.measured_process.lifeline import Stopped, stop_on_signals
from tests.conftest import ROOT


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_stop_python_dropped_in_a_weakref_callback_lands_at_the_next_check() -> None:
    class Held:
        pass

    def callback(_: object) -> None:  # the handler runs here; Python ignores what it raises
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)

    with pytest.raises(Stopped) as stopped, stop_on_signals() as stop:
        held = Held()
        ref = weakref.ref(held, callback)
        del held  # the callback runs now: "Exception ignored in: ..."
        assert ref() is None
        stop.check()  # the loop's safe point
        pytest.fail("the stop was lost")
    assert stopped.value.signum == signal.SIGTERM


def test_a_stop_inside_a_deferred_section_lands_when_it_ends() -> None:
    finished = []
    with pytest.raises(Stopped), stop_on_signals() as stop:
        with stop.deferred():  # Optuna's ask() or tell(), say
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.1)
            finished.append("the write")
        pytest.fail("the stop did not land at the section's end")
    assert finished == ["the write"]


def test_a_second_signal_stops_a_study_driver_at_once() -> None:
    code = textwrap.dedent("""
        import os, signal, time
        from mlflow_dlaas.measured_process.lifeline import Stopped, stop_on_signals
        with stop_on_signals(escalate=True):
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            except Stopped:
                print("cleaning up", flush=True)
                os.kill(os.getpid(), signal.SIGINT)  # the user insists
                time.sleep(5)
                print("cleanup finished", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 128 + signal.SIGINT, done.stderr
    assert done.stdout == "cleaning up\n"
    assert "a second SIGINT: stopping at once" in done.stderr


def test_an_entry_point_ignores_signals_after_the_first_while_it_cleans_up() -> None:
    with pytest.raises(Stopped) as stopped, stop_on_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # interrupted
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # its launcher again: ignored
            time.sleep(0.05)
    assert stopped.value.signum == signal.SIGTERM
