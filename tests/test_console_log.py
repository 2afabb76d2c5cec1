"""The console shows our progress lines plainly, every warning, and no library INFO chatter
unless MLFLOW_DLAAS_VERBOSE asks for it."""

from __future__ import annotations

import os
import subprocess
import sys

from mlflow_dlaas.console_log import VERBOSE_ENV

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
