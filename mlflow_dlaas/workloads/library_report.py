"""The measured worker's report of its parallel libraries: read back what is mapped and in
force, log it over the worker's channel, and refuse a run whose requested settings are not."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mlflow_dlaas.libraries.readback import (
    ARTIFACT_DIR,
    ARTIFACT_FILE,
    LibraryNotInForce,
    problems,
    read_back,
)
from mlflow_dlaas.measured_process.channel import WorkerChannel, worker_dir
from mlflow_dlaas.parallelism import ParallelismSettings


def report_libraries(channel: WorkerChannel, settings: ParallelismSettings, framework: str,
                     consumer_name: str = "", state: Mapping[str, Any] | None = None) -> None:
    """Read back, log params / tags / ``libraries/readback.json`` over ``channel``, then
    raise LibraryNotInForce naming every requested setting not in force."""
    found = read_back(consumer_name, state)
    channel.params(found.params())
    channel.tags(found.tags())
    out: Path = worker_dir()
    issues = problems(settings, found, framework)
    record = {"requested": {k: v for k, v in asdict(settings).items() if k != "cpu_affinity"},
              **asdict(found), "not_in_force": issues}
    (out / ARTIFACT_FILE).write_text(json.dumps(record, indent=2, default=str))
    channel.artifacts(out, ARTIFACT_DIR)
    if issues:
        raise LibraryNotInForce("library settings not in force in the measured worker: "
                                + "; ".join(issues))
