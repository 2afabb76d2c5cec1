"""Where the MLflow Projects (``<framework>/MLproject``) are, without importing MLflow.

A checkout has them in ``projects/``; a wheel carries a copy as ``mlflow_dlaas/projects/``
(see setup.py). ``mlflow-dlaas projects-path`` prints the folder for ``mlflow run``.
"""

from __future__ import annotations

import os
from pathlib import Path

from mlflow_dlaas.errors import ConfigError

PROJECTS_ENV = "MLFLOW_DLAAS_PROJECTS"
#: the ``name:`` of the checkout's own MLproject (the demo job); each framework's is
#: ``dlaas-<framework>``
OWN_PROJECT_NAME = "mlflow-dlaas"


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


def is_our_project(uri: str) -> bool:
    """Whether ``uri`` is a folder holding one of this package's MLflow Projects (the
    checkout's own ``MLproject`` or a ``dlaas-<framework>`` one, wherever it was copied): an
    ``MLproject`` whose ``name:`` is one of ours. A git URI or anything unreadable is not."""
    import yaml

    try:
        declared = yaml.safe_load((Path(uri) / "MLproject").read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return False
    name = declared.get("name") if isinstance(declared, dict) else None
    return name == OWN_PROJECT_NAME or name in {f"dlaas-{f}" for f in _framework_projects()}


def _framework_projects() -> frozenset[str]:
    """The framework projects this package ships (``pytorch``, ``mxnet``, ...)."""
    try:
        return frozenset(p.parent.name for p in projects_dir().glob("*/MLproject"))
    except ConfigError:
        return frozenset()
