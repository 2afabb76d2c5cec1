"""MLflow's run context provider for this package (an entry point MLflow loads in every
process that imports it, ``mlflow run`` included): it tags the runs mlflow-dlaas starts with
the machine's fingerprint, and in ``mlflow run`` of one of our projects keeps passwords out
of MLflow's run links and guards the run ``mlflow run`` makes."""

from __future__ import annotations

import os
import sys

from mlflow_dlaas.environment import as_tags, fingerprint
from mlflow_dlaas.store.launcher_guard import guard_mlflow_run_cli, runs_our_project
from mlflow_dlaas.store.store_uri import ACTIVE_ENV, TRACKING_ENV, quiet_run_links


class DlaasRunContextProvider:
    """MLflow run context provider: tags every run that mlflow-dlaas starts.

    MLflow makes one in every process that imports it where this package is installed, plain
    ``mlflow run`` included. In ``mlflow run`` of one of our projects it also switches off
    MLflow's "View run ... at:" links when the tracking URI carries a password, which MLflow
    would print as given, and guards the run ``mlflow run`` makes
    (:mod:`mlflow_dlaas.store.launcher_guard`). Anywhere else it does nothing but answer
    :meth:`in_context` (false outside mlflow-dlaas's own processes).
    """

    def __init__(self) -> None:
        if runs_our_project(sys.argv):
            quiet_run_links(os.environ.get(TRACKING_ENV, ""))
            guard_mlflow_run_cli()

    def in_context(self) -> bool:
        return os.environ.get(ACTIVE_ENV) == "1"

    def tags(self) -> dict[str, str]:
        return as_tags(fingerprint())
