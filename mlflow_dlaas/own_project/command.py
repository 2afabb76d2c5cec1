"""``mlflow-dlaas monitor -- CMD``: run a command in an MLflow run, with the asked thread and
library settings applied around it, watched from outside (:mod:`.watch`)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mlflow

from mlflow_dlaas.errors import CommandNotExecutableError, CommandNotFoundError, ConfigError
from mlflow_dlaas.monitor.resource_monitor import validate_interval
from mlflow_dlaas.own_project.settings import (
    OUTSIDE_SETTINGS,
    outside_environment,
    split_settings,
)
from mlflow_dlaas.own_project.watch import OutsideWatch
from mlflow_dlaas.redaction import redact_command, redact_text, redact_value
from mlflow_dlaas.runs.schema import (
    COMMAND_TAG,
    ENTRY_TAG,
    EXIT_CODE,
    EXIT_CODE_TAG,
    KERNEL_CPU_TIME,
    KERNEL_MAX_RSS,
    REASON_TAG,
    WALL_TIME,
)
from mlflow_dlaas.store.experiments import ensure_experiment
from mlflow_dlaas.store.lifecycle import deliver_held_writes
from mlflow_dlaas.store.ownership import owner_tags
from mlflow_dlaas.store.tracking import configure_tracking

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class CommandOutcome:
    """How a monitored command ended, with the kernel's own accounting of its tree."""

    run_id: str
    exit_code: int
    wall_time_s: float
    kernel_cpu_seconds: float
    kernel_max_rss_bytes: int
    #: the asked settings the command did not take (then the run is FAILED)
    problems: tuple[str, ...] = ()


def validate_command(argv: Sequence[str]) -> list[str]:
    """Return the command if it can be launched, else raise a clear error."""
    if not argv:
        raise ConfigError(
            "no command given: put the command after '--', e.g. "
            "mlflow-dlaas monitor -- python train.py"
        )
    program = argv[0]
    if os.sep in program and os.path.exists(program):  # a path, as a shell runs it
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            what = "a directory" if os.path.isdir(program) else "not executable"
            raise CommandNotExecutableError(
                f"cannot execute {program!r}: it is {what}; give a program or script with "
                f"execute permission (chmod +x), or run it with its interpreter "
                f"(e.g. -- python {program})")
    elif shutil.which(program) is None:
        raise CommandNotFoundError(
            f"command not found: {program!r}; check the spelling or give its full path"
        )
    return list(argv)


#: Programs that run a script: the run is named after the script they run.
INTERPRETERS = ("python", "python3", "bash", "sh", "node", "Rscript", "julia", "perl", "ruby")


def monitor_run_name(command: Sequence[str]) -> str:
    """``monitor-<program>[-<script>]``: ``monitor-python-fit.py`` for ``python fit.py --lr 1``,
    ``monitor-make`` for ``make train`` (a user's ``--run-name`` wins)."""
    program = Path(command[0]).name
    words = [program]
    script = next((a for a in command[1:] if not a.startswith("-")), None)
    if program.split(".")[0].rstrip("0123456789.") in INTERPRETERS and script:
        words.append(Path(script.split()[0]).name if script.split() else script)
    return "-".join(["monitor", *words])[:250]


def _how_it_ended(exit_code: int) -> str:
    """Why a monitored run ended FAILED, in words (128 + N: killed by signal N)."""
    if exit_code > 128:
        try:
            return f"the command was killed by {signal.Signals(exit_code - 128).name}"
        except ValueError:
            pass
    return f"the command exited with code {exit_code}"


def run_monitored(
    argv: Sequence[str],
    *,
    interval_s: float,
    experiment: str | None = None,
    run_name: str | None = None,
    settings: Mapping[str, str] | None = None,
) -> CommandOutcome:
    """Start (or resume) a run, launch ``argv`` with ``settings`` (names of
    :data:`~mlflow_dlaas.own_project.settings.OUTSIDE_SETTINGS`) applied, watch its tree
    until it exits.

    Input is validated before any run exists. The run always ends: FINISHED when the
    command exits 0 and took its settings, FAILED otherwise, KILLED when we were interrupted.
    A tracking server that goes away meanwhile loses nothing: the run's writes wait in its
    journal (sent at the end if the server is back, else ``mlflow-dlaas resend``).
    """
    command = validate_command(argv)
    validate_interval(interval_s)
    applied, unknown = split_settings(settings or {})
    if unknown:
        raise ConfigError(f"--set {', '.join(unknown)}: not a setting mlflow-dlaas applies; "
                          f"valid: {', '.join(OUTSIDE_SETTINGS)}")
    environment = outside_environment(applied)
    configure_tracking()
    experiment_id = ensure_experiment(experiment) if experiment else None
    run = mlflow.start_run(experiment_id=experiment_id,
                           run_name=run_name or monitor_run_name(command), tags=owner_tags())
    run_id = run.info.run_id
    status = "KILLED"
    try:
        mlflow.set_tags({COMMAND_TAG: " ".join(redact_command(command))[:5000],
                         ENTRY_TAG: "monitor"})
        if settings:
            mlflow.log_params({k: redact_value(str(v)) for k, v in settings.items()})
        outcome = _launch_and_watch(command, run_id, OutsideWatch(applied, interval_s=interval_s),
                                    environment)
        status = "FINISHED" if outcome.exit_code == 0 and not outcome.problems else "FAILED"
        if outcome.exit_code != 0:
            mlflow.set_tag(REASON_TAG, _how_it_ended(outcome.exit_code))
        elif outcome.problems:
            mlflow.set_tag(REASON_TAG, redact_text("; ".join(outcome.problems))[:5000])
        return outcome
    except CommandNotExecutableError as e:
        status = "FAILED"
        mlflow.set_tag(REASON_TAG, redact_text(str(e)))
        raise
    finally:
        mlflow.end_run(status)
        deliver_held_writes("mlflow-dlaas")  # a server away: the journal and how to resend


def _launch_and_watch(command: list[str], run_id: str, watch: OutsideWatch,
                      environment: Mapping[str, str]) -> CommandOutcome:
    env = dict(os.environ, MLFLOW_RUN_ID=run_id, **environment, **watch.environment())
    started = time.perf_counter()
    try:
        with watch.launching():
            proc = subprocess.Popen(command, env=env)
    except OSError as e:  # found, but the kernel will not run it (bad interpreter, format)
        raise CommandNotExecutableError(
            f"cannot execute {command[0]!r}: {e.strerror or e}; check its #! line and "
            "permissions, or run it with its interpreter") from None
    previous = {sig: signal.signal(sig, lambda s, _f: proc.send_signal(s)) for sig in
                FORWARDED_SIGNALS}
    try:
        watch.start(run_id, proc.pid)
        # Wait for the exit without reaping, so the last sample still sees the process.
        _wait_exited(proc.pid)
        wall = time.perf_counter() - started
        problems = watch.finish().problems
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc.returncode is None:
            proc.kill()
            proc.wait()
        watch.stop()
    exit_code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    outcome = CommandOutcome(
        run_id=run_id,
        exit_code=exit_code,
        wall_time_s=wall,
        kernel_cpu_seconds=usage.ru_utime + usage.ru_stime,
        kernel_max_rss_bytes=usage.ru_maxrss * 1024,
        problems=problems,
    )
    mlflow.log_metrics(
        {
            EXIT_CODE: float(exit_code),
            WALL_TIME: outcome.wall_time_s,
            KERNEL_CPU_TIME: outcome.kernel_cpu_seconds,
            KERNEL_MAX_RSS: float(outcome.kernel_max_rss_bytes),
        }
    )
    mlflow.set_tag(EXIT_CODE_TAG, str(exit_code))
    return outcome


def _wait_exited(pid: int) -> None:
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
