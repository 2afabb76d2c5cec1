"""Where the MLflow Projects (``<framework>/MLproject``) are, without importing MLflow.

A checkout has them in ``projects/``; a wheel carries a copy as ``mlflow_dlaas/projects/``
(see setup.py). ``mlflow-dlaas projects-path`` prints the folder for ``mlflow run``.
"""

from __future__ import annotations

import os
from pathlib import Path

from mlflow_dlaas.errors import ConfigError

PROJECTS_ENV = "MLFLOW_DLAAS_PROJECTS"


def projects_dir() -> Path:
    """The folder holding ``<framework>/MLproject``: ``$MLFLOW_DLAAS_PROJECTS`` when set, else
    the copy an installed wheel carries (``mlflow_dlaas/projects``), else a checkout's
    ``projects/`` (an editable install)."""
    if os.environ.get(PROJECTS_ENV):
        path = Path(os.environ[PROJECTS_ENV]).resolve()
        if not (path / "pytorch" / "MLproject").is_file():
            raise ConfigError(f"{PROJECTS_ENV}={os.environ[PROJECTS_ENV]} holds no MLflow "
                              "Projects (no pytorch/MLproject); unset it or name a projects/ "
                              "folder")
        return path
    package = Path(__file__).resolve().parent
    for path in (package / "projects", package.parent / "projects"):
        if (path / "pytorch" / "MLproject").is_file():
            return path
    raise ConfigError(f"cannot find the MLflow Projects: neither {package / 'projects'} (an "
                      f"installed wheel) nor {package.parent / 'projects'} (a checkout); "
                      f"reinstall mlflow-dlaas or set {PROJECTS_ENV}")


def project_dir(name: str) -> Path:
    """The folder of the MLflow Project ``name`` (a framework or runtime), for ``mlflow run``."""
    root = projects_dir()
    if not (root / name / "MLproject").is_file():
        have = ", ".join(sorted(p.parent.name for p in root.glob("*/MLproject")))
        raise ConfigError(f"no MLflow Project {name!r} in {root} (have: {have})")
    return root / name
