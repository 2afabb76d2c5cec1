"""Run-scoped temp folders, named by their owner's PID, and the sweep of those whose owner died.

A folder is removed when its run ends; one whose owner was killed with SIGKILL cannot be,
so the next run on this machine removes it (the owner's PID is gone).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

_OWNED = re.compile(r"dlaas-(?:run|source)-(\d+)-")


def scratch_dir(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A temp folder ``dlaas-<kind>-<our pid>-...``, removed when the context exits."""
    sweep_dead_owners()
    return tempfile.TemporaryDirectory(prefix=f"dlaas-{kind}-{os.getpid()}-")


def sweep_dead_owners(root: Path | None = None) -> list[Path]:
    """Remove the scratch folders whose owner process no longer exists; returns them."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    for folder in root.glob("dlaas-*-*-*"):
        found = _OWNED.match(folder.name)
        if found and folder.is_dir() and not _alive(int(found.group(1))):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
