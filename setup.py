"""Build hook (all other metadata is in pyproject.toml): the wheel carries the MLflow Projects.

The top-level ``projects/`` folder (where ``mlflow run projects/<framework>`` finds them in a
checkout) is copied into the built package as ``mlflow_dlaas/projects/``, so an installed
wheel can run studies and the demo; ``mlflow-dlaas projects-path`` prints where they are. An
editable install copies nothing: the package finds ``projects/`` in the checkout.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PROJECTS = Path(__file__).resolve().parent / "projects"


class BuildPyWithProjects(build_py):
    """``build_py`` that also copies ``projects/`` into the built ``mlflow_dlaas``."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        if not (PROJECTS / "pytorch" / "MLproject").is_file():
            raise FileNotFoundError(f"{PROJECTS} holds no MLflow Projects; build from a "
                                    "checkout or an sdist that includes projects/")
        target = Path(self.build_lib) / "mlflow_dlaas" / "projects"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(PROJECTS, target,
                        ignore=shutil.ignore_patterns("__pycache__", "*.py[co]"))


setup(cmdclass={"build_py": BuildPyWithProjects})
