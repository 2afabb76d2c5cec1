"""Build hook (all other metadata is in pyproject.toml): the wheel carries the MLflow Projects
and the claims' study specs.

The top-level ``projects/`` folder (where ``mlflow run projects/<framework>`` finds them in a
checkout) is copied into the built package as ``mlflow_dlaas/projects/``, so an installed
wheel can run studies and the demo; ``mlflow-dlaas projects-path`` prints where they are.
``examples/reproduce/`` becomes ``mlflow_dlaas/reproduce/specs/`` for ``mlflow-dlaas
reproduce``. An editable install copies nothing: the package finds both in the checkout.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PROJECTS = ROOT / "projects"
#: checkout folder -> folder inside the built package
PACKAGED = {PROJECTS: Path("mlflow_dlaas", "projects"),
            ROOT / "examples" / "reproduce": Path("mlflow_dlaas", "reproduce", "specs")}


class BuildPyWithProjects(build_py):
    """``build_py`` that also copies :data:`PACKAGED` into the built ``mlflow_dlaas``."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        if not (PROJECTS / "pytorch" / "MLproject").is_file():
            raise FileNotFoundError(f"{PROJECTS} holds no MLflow Projects; build from a "
                                    "checkout or an sdist that includes projects/")
        for source, inside in PACKAGED.items():
            target = Path(self.build_lib) / inside
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target,
                            ignore=shutil.ignore_patterns("__pycache__", "*.py[co]"))


setup(cmdclass={"build_py": BuildPyWithProjects})
