"""Start an mlflow-dlaas module with the mlflow-dlaas package that sits beside these projects.

Every ``projects/<name>/MLproject`` runs ``python ../run_workload.py MODULE ARGS...``. The
folder holding this file is ``projects/`` in a checkout (the package is ``../mlflow_dlaas``)
or ``mlflow_dlaas/projects/`` in an installed wheel (the package is ``..``). When the
environment's ``python`` already imports that package (``--env-manager local``), the module
runs as it is. Otherwise (a ``virtualenv`` or ``uv`` environment built from
``python_env.yaml``, which holds the dependencies but not mlflow-dlaas itself), the package
is put first on ``PYTHONPATH`` through a folder that holds only a link to it, so the
environment sees no other package of the place mlflow-dlaas is installed in (an installed
wheel's site-packages would shadow the environment's own numpy, for one). The module's own
subprocesses inherit that ``PYTHONPATH``.

Standard library only: it runs in whichever interpreter the environment has.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

PACKAGE = "mlflow_dlaas"


def beside_package() -> Path | None:
    """The mlflow-dlaas package next to this projects folder, if there is one."""
    here = Path(__file__).resolve().parent
    for package in (here.parent, here.parent / PACKAGE):
        if package.name == PACKAGE and (package / "__init__.py").is_file():
            return package
    return None


def imported_package() -> Path | None:
    """The folder this interpreter imports mlflow-dlaas from, if any."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def import_root(package: Path) -> Path:
    """A per-user folder holding only a link named ``mlflow_dlaas`` to ``package``."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(str(package).encode()).hexdigest()[:16]
    root = cache / "mlflow-dlaas" / "import-roots" / key
    link = root / PACKAGE
    if not (link.is_symlink() and Path(os.readlink(link)) == package):
        root.mkdir(parents=True, exist_ok=True)
        staging = root / f".{PACKAGE}.{os.getpid()}"
        staging.unlink(missing_ok=True)
        staging.symlink_to(package, target_is_directory=True)
        os.replace(staging, link)
    return root


def main(argv: list[str]) -> None:
    """``run_workload.py MODULE ARGS...``: replace this process by ``python -m MODULE ARGS``."""
    if not argv or argv[0].startswith("-"):
        sys.exit("usage: run_workload.py MODULE [ARGS...]")
    env = dict(os.environ)
    package = beside_package()
    if package is not None and imported_package() != package:
        try:
            root = str(import_root(package))
        except OSError as e:
            sys.exit(f"run_workload.py: cannot link mlflow-dlaas into the cache folder ({e}); "
                     "set XDG_CACHE_HOME to a writable folder")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    os.execve(sys.executable, [sys.executable, "-m", *argv], env)


if __name__ == "__main__":
    main(sys.argv[1:])
