"""What every measured worker's ``main`` shares: params in, work, the result or error out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from mlflow_dlaas.console_log import console
from mlflow_dlaas.errors import DlaasError
from mlflow_dlaas.measured_process.channel import WorkerChannel, entry_config

log = console(__name__)

Work = Callable[[Mapping[str, Any], WorkerChannel], Mapping[str, Any] | None]


def serve(name: str, work: Work) -> int:
    """Run ``work`` on the configuration the entry validated (:func:`entry_config`); report
    its result, or its error, to the entry process; the exit code is 0 or the error's."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    channel = WorkerChannel()
    try:
        result = work(entry_config(), channel)
    except DlaasError as e:
        channel.error(e)
        log.info(f"mlflow-dlaas {name} worker: error: {e}")
        return e.exit_code
    channel.result(**(result or {}))
    return 0
