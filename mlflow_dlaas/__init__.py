"""mlflow-dlaas: comparative measurement studies of deep-learning frameworks in MLflow.

Importing this package imports no deep-learning framework and no NVML binding. It switches
MLflow's usage telemetry off for this process and its children, unless the user set
``MLFLOW_DISABLE_TELEMETRY``: its thread competes with the measured work, and where its
server cannot be reached (as on a machine with no internet) MLflow 3.17 removes a variable
from ``os.environ`` while a request to the tracking server may be reading it, which failed
a ``log_batch`` with ``KeyError: '_MLFLOW_TELEMETRY_SESSION_ID'`` here.
"""

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from mlflow_dlaas.own_project.phase_marks import phase  # noqa: E402 (after the variable)

__version__ = "0.1.0"

__all__ = ["__version__", "phase"]
