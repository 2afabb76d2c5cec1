"""How a command's errors reach the user: each in one line on stderr with its exit code,
never a traceback for a store that did not answer; under ``mlflow run``, the reason on the
run MLflow then ends FAILED."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from mlflow_dlaas.errors import DlaasError
from mlflow_dlaas.redaction import redact_text, redact_uri
from mlflow_dlaas.store.database_bounds import stalled_database_reason
from mlflow_dlaas.store.store_uri import TRACKING_ENV, is_unreachable

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(func: F) -> F:
    """Turn a :class:`DlaasError` into its message on stderr and its exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from mlflow_dlaas.measured_process.lifeline import Stopped

        try:
            return func(*args, **kwargs)
        except Stopped as e:  # cleaned up already; the shell's convention for a signal
            click.echo(f"mlflow-dlaas: {e}", err=True)
            sys.exit(128 + e.signum)
        except DlaasError as e:
            click.echo(f"mlflow-dlaas: error: {redact_text(str(e))}", err=True)
            _give_launcher_run_the_reason(redact_text(str(e)))
            sys.exit(e.exit_code)
        except Exception as e:  # mlflow is imported only where a command needs it
            from mlflow.exceptions import MlflowException

            stalled = stalled_database_reason(e)
            if stalled or is_unreachable(e):  # what runs kept, before the error's own line
                from mlflow_dlaas.store.lifecycle import deliver_held_writes

                deliver_held_writes("mlflow-dlaas", within_s=0.0)
            if stalled:
                click.echo(f"mlflow-dlaas: error: the database server {stalled}; check it, "
                           "then run the command again (a study resumes where it stopped)",
                           err=True)
                sys.exit(1)
            if not isinstance(e, MlflowException):
                raise
            # the tracking store said no: say so, without a trace
            if is_unreachable(e):
                click.echo(f"mlflow-dlaas: error: the tracking server at "
                           f"{redact_uri(os.environ.get(TRACKING_ENV, '?'))} does not answer; "
                           "start it and run the command again (a study resumes; what runs "
                           "logged meanwhile waits in their journals: mlflow-dlaas resend)",
                           err=True)
                sys.exit(1)
            hint = ""
            if "401" in str(e) or "403" in str(e):
                hint = (" (set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or "
                        "MLFLOW_TRACKING_TOKEN, for this server)")
            click.echo(f"mlflow-dlaas: error: MLflow tracking: {redact_text(e.message)}{hint}",
                       err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def _give_launcher_run_the_reason(reason: str) -> None:
    """Under ``mlflow run . -e ...`` the command runs inside an MLflow Projects run that
    MLflow ends FAILED when we exit non-zero: it says why, as every failed run of ours does."""
    run_id = os.environ.get("MLFLOW_RUN_ID")
    if not run_id:
        return
    from mlflow_dlaas.runs.schema import REASON_TAG

    try:
        import mlflow

        mlflow.MlflowClient().set_tag(run_id, REASON_TAG, reason[:5000])
    except Exception as e:  # the store itself may be what failed; the message is printed
        click.echo(f"mlflow-dlaas: could not record the reason on run {run_id}: {e}", err=True)
