"""A helper process the entry starts before measuring (opening a user's model in its own
framework, exporting a fresh model to ONNX): its error comes back typed, through a file the
helper's :func:`~mlflow_dlaas.errors.exit_code_of` writes, never scraped from stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mlflow_dlaas.errors import ERROR_FILE_ENV, WorkloadError, error_from_record
from mlflow_dlaas.redaction import redact_text

#: How much of a crashed helper's stderr its error quotes.
TAIL_CHARS = 2000


def run_helper(module: str, args: Sequence[str], doing: str) -> None:
    """``python -m module args``; its own error raised here as the same class, any other
    failure a :class:`WorkloadError` saying what it was ``doing`` and how its output ends."""
    with tempfile.TemporaryDirectory(prefix="dlaas-helper-") as folder:
        error_file = Path(folder) / "error.json"
        environment = {**os.environ, ERROR_FILE_ENV: str(error_file)}
        done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                              text=True, env=environment)
        if error_file.is_file():
            raise error_from_record(json.loads(error_file.read_text()))
    if done.returncode != 0:
        tail = redact_text(done.stderr.strip()[-TAIL_CHARS:]) or "(no output)"
        raise WorkloadError(f"{doing} failed (exit code {done.returncode}): {tail}")
