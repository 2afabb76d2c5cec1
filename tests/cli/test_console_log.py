"""The console shows our progress lines plainly, every warning, and no library INFO chatter
unless MLFLOW_DLAAS_VERBOSE asks for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlflow_dlaas.console_log import VERBOSE_ENV
from tests.conftest import ROOT

PROBE = """
import logging
from mlflow_dlaas.console_log import configure_console_logging
configure_console_logging()
logging.getLogger("mlflow_dlaas.workloads.train").info("epoch 1: loss 0.25")
logging.getLogger("matplotlib.font_manager").info("generated new fontManager")
logging.getLogger("mlflow.store.db.utils").info("Creating initial MLflow database tables")
logging.getLogger("mlflow_dlaas.monitor").warning("a probe failed")
"""


def _stderr(verbose: str) -> list[str]:
    env = {**os.environ, VERBOSE_ENV: verbose}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, check=True)
    return done.stderr.splitlines()


def test_quiet_by_default() -> None:
    assert _stderr("0") == ["epoch 1: loss 0.25",
                            "WARNING mlflow_dlaas.monitor: a probe failed"]


def test_verbose_shows_the_libraries_info_lines() -> None:
    shown = _stderr("1")
    assert "INFO matplotlib.font_manager: generated new fontManager" in shown
    assert "INFO mlflow.store.db.utils: Creating initial MLflow database tables" in shown


ONCE = """
import logging
from mlflow_dlaas.console_log import configure_console_logging, console
console("mlflow_dlaas.demo").info("demo: report: here")
configure_console_logging()
console("mlflow_dlaas.demo").info("demo: once")
console("__main__").info("a module run as a program")
"""


def test_our_lines_reach_stderr_once_whether_or_not_logging_was_configured() -> None:
    done = subprocess.run([sys.executable, "-c", ONCE], capture_output=True, text=True,
                          check=True)
    assert done.stderr.splitlines() == ["demo: report: here", "demo: once",
                                        "a module run as a program"]
    assert done.stdout == ""


def test_a_line_follows_stderr_where_it_is_now(capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow_dlaas.console_log import console

    console("mlflow_dlaas.tests").info("captured here")
    assert capsys.readouterr().err == "captured here\n"


def test_only_the_commands_one_line_errors_write_to_stderr_directly() -> None:
    """Everything else goes through the logger tree (``console(__name__)``)."""
    found = sorted(f"{path.relative_to(ROOT)}:{n}"
                   for path in (ROOT / "mlflow_dlaas").rglob("*.py")
                   for n, line in enumerate(path.read_text().splitlines(), 1)
                   if "file=sys.stderr" in line)
    assert found == ["mlflow_dlaas/errors.py:131"], found


def test_env_json_says_nothing_on_stderr() -> None:
    """``env --json`` imports every installed framework: their native banners (TensorFlow's
    absl lines) stay off the console, and stdout is the JSON alone."""
    import json
    import shutil

    command = shutil.which("mlflow-dlaas", path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip("the mlflow-dlaas console script is not beside this Python")
    env = {k: v for k, v in os.environ.items() if k != VERBOSE_ENV}
    done = subprocess.run([command, "env", "--json"], capture_output=True, text=True,
                          timeout=300, env=env, check=True)
    assert done.stderr == ""
    assert json.loads(done.stdout)["cpu_model"]
