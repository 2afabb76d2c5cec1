"""What ``mlflow-dlaas reproduce`` does, below the CLI."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mlflow import MlflowClient

from mlflow_dlaas.environment import this_host
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.redaction import redact_uri
from mlflow_dlaas.report.publish import default_output
from mlflow_dlaas.reproduce import claims_report
from mlflow_dlaas.reproduce.claims import PLANS, parse_claims
from mlflow_dlaas.reproduce.runner import (
    SPEC_DIR,
    ClaimResult,
    announce,
    judge,
    plan_steps,
    run_steps,
    stderr,
)
from mlflow_dlaas.store.experiments import ensure_experiment
from mlflow_dlaas.store.tracking import configure_tracking


@dataclass(frozen=True)
class Reproduced:
    """The verdicts, the report's files and its run."""

    results: list[ClaimResult]
    html: Path
    markdown: Path
    run_id: str | None
    failed: dict[str, str]  # study name -> why it failed


def reproduce(*, plan: str, claims: str | None, experiment: str, output: str | None,
              specs: str | None = None, include_disturbed: bool = False,
              log_run: bool = True) -> Reproduced:
    """Run the selected claims' studies (resuming them), judge every claim on this host's
    valid runs, write the claims report and log it as a report run in ``experiment``.

    Disturbed and unverified runs count only with ``include_disturbed``. ``specs`` is the
    folder of the claims' study specs (default: the checkout's
    ``examples/reproduce/``)."""
    if plan not in PLANS:
        raise ConfigError(f"unknown plan {plan!r}; choose one of: {', '.join(PLANS)}")
    chosen = parse_claims(claims)
    folder = Path(specs) if specs else SPEC_DIR
    if not folder.is_dir():
        raise ConfigError(f"--specs {folder}: no such folder; give the examples/reproduce/ "
                          "folder of a checkout of mlflow-dlaas")
    steps, known = plan_steps(chosen, plan, experiment, folder)  # every spec checked first
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    uri = configure_tracking().uri
    client = MlflowClient()
    announce(plan, steps, stderr)
    for number, verdict in sorted(known.items()):
        stderr(f"claim {number}: {verdict.verdict}: {verdict.reason}")
    failed = run_steps(steps, stderr)
    host = this_host()
    results = judge(client, chosen, steps, known, failed, host,
                    include_disturbed=include_disturbed)
    report = claims_report.build(plan, host, redact_uri(uri), results, include_disturbed)
    directory = Path(output) if output else default_output(f"reproduce-{plan}")
    try:
        files = claims_report.write(report, directory)
    except OSError as e:
        raise ConfigError(f"cannot write the report to {directory}: {e.strerror or e}; give "
                          "--output a folder you can write to") from None
    run_id = None
    if log_run:
        run_id = claims_report.log_run(client, report, files, directory,
                                       ensure_experiment(experiment))
    return Reproduced(results, files[0], files[1], run_id, failed)
