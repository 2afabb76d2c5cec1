"""What every measured worker's ``main`` shares: params in, work, the result or error out."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mlflow_dlaas.config import parse_cli_params
from mlflow_dlaas.console_log import console
from mlflow_dlaas.errors import DlaasError
from mlflow_dlaas.measured_process.channel import WorkerChannel

log = console(__name__)

Work = Callable[[Mapping[str, str], WorkerChannel], Mapping[str, Any] | None]


def serve(name: str, argv: Sequence[str] | None, work: Work) -> int:
    """Run ``work`` on the ``--name value`` params; report its result, or its error, to the
    entry process; the exit code is 0 or the error's."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    channel = WorkerChannel()
    try:
        result = work(parse_cli_params(sys.argv[1:] if argv is None else argv), channel)
    except DlaasError as e:
        channel.error(e)
        log.info(f"mlflow-dlaas {name} worker: error: {e}")
        return e.exit_code
    channel.result(**(result or {}))
    return 0
