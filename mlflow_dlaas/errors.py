"""One error hierarchy. Every message says what was wrong and how to fix it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

#: Exit code for bad input (a usage error): nothing was launched.
EXIT_USAGE = 2
#: Exit code when a run's results wait in its journal for a tracking server that did not
#: answer (``mlflow-dlaas resend`` sends them): sysexits' EX_TEMPFAIL.
EXIT_UNDELIVERED = 75
#: Exit code when the command to run cannot be found, as shells use.
EXIT_COMMAND_NOT_FOUND = 127
#: Exit code when the command to run exists but cannot be executed, as shells use.
EXIT_COMMAND_NOT_EXECUTABLE = 126


class DlaasError(Exception):
    """Base class of every error mlflow-dlaas raises on purpose."""

    exit_code: int = 1


class ConfigError(DlaasError, ValueError):
    """A setting, option or spec value is invalid; nothing was started."""

    exit_code = EXIT_USAGE


class NotMeasurableHereError(ConfigError):
    """A valid setting this machine cannot measure as it is meant (bf16 on a CPU without
    native bf16): one run asking for it is refused; a study skips the points that hold it."""


class CommandNotFoundError(DlaasError):
    """The command to launch does not exist on PATH."""

    exit_code = EXIT_COMMAND_NOT_FOUND


class CommandNotExecutableError(DlaasError):
    """The command to launch exists but is not an executable (permissions, a directory,
    not a program or script)."""

    exit_code = EXIT_COMMAND_NOT_EXECUTABLE


class StoreMismatchError(DlaasError):
    """A study's storage names runs the tracking store does not hold (one of the two was
    deleted or replaced, or MLFLOW_TRACKING_URI points elsewhere)."""


class TrackingUnavailableError(DlaasError):
    """The tracking server or database, or a study's storage, does not answer within its
    bound, or refuses the connection."""


class DiskFullError(DlaasError):
    """A disk this run writes to (its artifacts, the tracking store, the worker's folder)
    is full."""


class MissingDependencyError(DlaasError, ImportError):
    """An optional package is not installed; the message names the extra to install."""

    def __init__(self, package: str, extra: str, purpose: str, hint: str = "") -> None:
        super().__init__(
            f"{purpose} needs the package {package!r}, which is not installed. "
            + (hint or f"Install it with: pip install 'mlflow-dlaas[{extra}]'")
        )
        self.package = package
        self.extra = extra


class SourceUnavailable(DlaasError):
    """A measurement source (NVML, RAPL, ...) is absent here; reported once, never fatal."""


class WorkloadError(DlaasError):
    """A measured workload failed (diverged, crashed, produced wrong outputs)."""


class NothingToCompareError(DlaasError):
    """Every finished run was left out of a comparison (all disturbed): no report."""


class ReportIncompleteError(DlaasError):
    """Some parts of a report could not be built or written; the others were written."""


#: Where a helper process writes its typed error (:func:`error_record`) for the process
#: that started it (:func:`error_from_record`); unset: the message on stderr only.
ERROR_FILE_ENV = "DLAAS_ERROR_FILE"


def error_record(error: DlaasError) -> dict[str, str]:
    """An error as it crosses to another process: its class's name and its message."""
    return {"type": type(error).__name__, "message": str(error)}


def error_from_record(record: Mapping[str, str]) -> DlaasError:
    """The error another process sent (:func:`error_record`), of the same class where it is
    one of ours, else a :class:`WorkloadError` with its message."""
    kind = _error_classes().get(record.get("type", ""), WorkloadError)
    error = kind.__new__(kind)
    Exception.__init__(error, record.get("message", ""))
    return error


def _error_classes() -> dict[str, type[DlaasError]]:
    found: dict[str, type[DlaasError]] = {}
    pending: list[type[DlaasError]] = [DlaasError]
    while pending:
        kind = pending.pop()
        found[kind.__name__] = kind
        pending.extend(kind.__subclasses__())
    return found


def exit_code_of(step: Callable[[], object]) -> int:
    """Run a helper process's one step: 0, or its error's exit code, with the message on
    stderr and, where the starting process named a file (``DLAAS_ERROR_FILE``), the typed
    error written there."""
    try:
        step()
    except DlaasError as e:
        print(e, file=sys.stderr)
        target = os.environ.get(ERROR_FILE_ENV)
        if target:
            Path(target).write_text(json.dumps(error_record(e)))
        return e.exit_code
    return 0
