"""One error hierarchy. Every message says what was wrong and how to fix it."""

from __future__ import annotations

import sys
from collections.abc import Callable

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


def exit_code_of(step: Callable[[], object]) -> int:
    """Run a helper process's one step: 0, or its error's exit code with the message as
    the last line on stderr (the entry that started the process reads it back)."""
    try:
        step()
    except DlaasError as e:
        print(e, file=sys.stderr)
        return e.exit_code
    return 0
