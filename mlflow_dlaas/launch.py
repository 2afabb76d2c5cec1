"""Start a ``projects/<name>`` entry point through MLflow Projects' local backend.

``mlflow.projects.run(synchronous=False)`` starts a whole ``mlflow run`` CLI process, which
imports MLflow and opens the store again only to start the entry point's command: about 2 s
of every trial. The local backend itself, in its direct mode, prepares the same environment
(local, virtualenv, uv), composes the same command and environment variables, and starts the
command at once; it returns a handle that does not wait. The run is ended by the workload;
a process that dies without ending it is ended by whoever waits on it.

MLflow's private surface stays in this module: ``LocalBackend`` with its config keys
(MLflow 3.17 has no public call that starts an entry point without a CLI process), the
handle's ``command_proc`` (``SubmittedRun`` offers only a blocking ``wait()``), and the
project reader ``_project_spec.load_project`` with the project's entry-point list (MLflow
3.17 has no public call that lists a project's parameters before it runs).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
from mlflow.environment_variables import MLFLOW_ENV_ROOT
from mlflow.projects._project_spec import load_project
from mlflow.projects.backend.local import LocalBackend
from mlflow.projects.submitted_run import SubmittedRun
from mlflow.projects.utils import (
    MLFLOW_LOCAL_BACKEND_RUN_ID_CONFIG,
    PROJECT_BUILD_IMAGE,
    PROJECT_DOCKER_ARGS,
    PROJECT_DOCKER_AUTH,
    PROJECT_ENV_MANAGER,
    PROJECT_STORAGE_DIR,
    PROJECT_SYNCHRONOUS,
    fetch_and_validate_project,
)

from mlflow_dlaas.console_log import quiet_library_chatter
from mlflow_dlaas.errors import EXIT_UNDELIVERED, ConfigError, WorkloadError
from mlflow_dlaas.measured_process.lifeline import stop_process_tree
from mlflow_dlaas.project_paths import PROJECTS_ENV as PROJECTS_ENV  # re-exported
from mlflow_dlaas.project_paths import project_dir, projects_dir
from mlflow_dlaas.redaction import redact_text, redact_uri
from mlflow_dlaas.store.ownership import launcher_environment
from mlflow_dlaas.store.run_ending import end_run


def use_this_python() -> None:
    """Put this interpreter's bin folder first on PATH.

    The local env manager starts ``python`` from PATH; without this, ``.venv/bin/mlflow-dlaas``
    run from an unactivated shell would find none, or another environment's.
    """
    own = os.path.dirname(sys.executable)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != own:
        os.environ["PATH"] = own + os.pathsep + os.environ.get("PATH", "")


#: Environment managers whose environments MLflow builds on first use, in a shared folder.
BUILT_ENVIRONMENTS = ("virtualenv", "uv")


@contextlib.contextmanager
def environment_lock(env_manager: str) -> Iterator[None]:
    """Hold the machine-wide lock on MLflow's project environments while one is prepared.

    MLflow builds a virtualenv or uv environment in place and takes any existing folder as
    ready: a second process starting the same project meanwhile (study workers, two commands
    on a fresh machine) would run in a half-built one. A no-op for other managers.
    """
    if env_manager not in BUILT_ENVIRONMENTS:
        yield
        return
    root = Path(MLFLOW_ENV_ROOT.get())
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".mlflow-dlaas-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even on SIGKILL
        yield


def environment_dir(project: str, env_manager: str = "virtualenv") -> Path:
    """The folder of ``projects/<project>``'s environment under ``env_manager``, as MLflow
    names it (it exists once built)."""
    from mlflow.utils.environment import _PythonEnv
    from mlflow.utils.virtualenv import _get_mlflow_virtualenv_root, _get_virtualenv_name

    if env_manager not in BUILT_ENVIRONMENTS:
        raise ConfigError(f"--env-manager {env_manager}: choose {' or '.join(BUILT_ENVIRONMENTS)}"
                          " (the local manager uses this environment and builds nothing)")
    work_dir = project_dir(project)
    python_env = _PythonEnv.from_yaml(str(work_dir / "python_env.yaml"))
    return Path(_get_mlflow_virtualenv_root()) / _get_virtualenv_name(python_env, work_dir)


def prepare_environment(project: str, env_manager: str = "virtualenv") -> Path:
    """Build, once, the environment ``projects/<project>``'s runs use under ``env_manager``
    (``virtualenv`` or ``uv``, from its ``python_env.yaml``), as MLflow's local backend does
    at a run's first start; return its folder. Ahead of time, the first run or trial does not
    wait minutes for it (MXNet's takes about 100 s here). MLflow 3.17 has no public call that
    builds a project's environment without starting a run."""
    from mlflow.utils.environment import _PythonEnv
    from mlflow.utils.virtualenv import _create_virtualenv

    work_dir = project_dir(project)
    python_env = _PythonEnv.from_yaml(str(work_dir / "python_env.yaml"))
    env_dir = environment_dir(project, env_manager)
    with environment_lock(env_manager):
        try:
            _create_virtualenv(local_model_path=work_dir, python_env=python_env,
                               env_dir=env_dir, env_manager=env_manager, capture_output=True)
        except Exception as e:  # MLflow's ShellCommandException holds pip's whole output
            said = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise WorkloadError(f"building {project}'s {env_manager} environment failed: "
                                f"{said}") from None
    return env_dir


@dataclass(frozen=True)
class ProjectEntry:
    """An MLflow Project's entry point, as MLflow reads it: the parameters it declares and
    whether it takes undeclared ones (a script entry point without an MLproject file)."""

    uri: str
    entry_point: str
    parameters: Mapping[str, str | None]  # name -> default (None: required)
    open_ended: bool


#: How long git may go without receiving anything from a server before it gives up.
GIT_STALL_S = 10
#: Bounds for every git command MLflow runs to clone a project: a server that accepts and
#: never answers (HTTP: fewer than 1 byte/s for GIT_STALL_S; ssh: connect and keep-alive
#: limits), and never a prompt for a password nobody will type. A user's own setting wins.
GIT_BOUNDS = {
    "GIT_HTTP_LOW_SPEED_LIMIT": "1",
    "GIT_HTTP_LOW_SPEED_TIME": str(GIT_STALL_S),
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_SSH_COMMAND": (f"ssh -o ConnectTimeout={GIT_STALL_S} -o ServerAliveInterval=5 "
                        "-o ServerAliveCountMax=2 -o BatchMode=yes"),
}


@contextlib.contextmanager
def bounded_git() -> Iterator[None]:
    """:data:`GIT_BOUNDS` in the environment for the block (where the user set none)."""
    added = {k: v for k, v in GIT_BOUNDS.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def read_project(uri: str, entry_point: str) -> ProjectEntry:
    """Fetch (a git URI is cloned, every wait bounded) and read the project at ``uri``;
    ConfigError naming the problem where it is not a project or has no such entry point."""
    try:
        with bounded_git():
            work_dir = fetch_and_validate_project(uri, None, entry_point, {})
        project = load_project(work_dir)
        entry = project.get_entry_point(entry_point)
    except Exception as e:  # MLflow's ExecutionException, git's errors: one line each
        text = redact_text(str(e))
        said = (text.strip().splitlines() or [type(e).__name__])[0]
        if "too slow" in text or "timed out" in text.lower():
            said = (f"the git server did not answer within {GIT_STALL_S} s; check the URI "
                    "and the network")
        raise ConfigError(f"project {redact_uri(uri)}: {said}") from None
    declared = {name: None if p.default is None else str(p.default)
                for name, p in entry.parameters.items()}
    return ProjectEntry(uri, entry_point, declared,
                        open_ended=entry_point not in (project._entry_points or {}))


def start_project_run(project: str, entry_point: str, params: Mapping[str, Any], *,
                      experiment_id: str, run_id: str | None = None,
                      env_manager: str = "local") -> SubmittedRun:
    """Start ``projects/<project>``'s entry point in a fresh process; do not wait."""
    return start_project(str(projects_dir() / project), entry_point, params,
                         experiment_id=experiment_id, run_id=run_id, env_manager=env_manager)


def start_project(uri: str, entry_point: str, params: Mapping[str, Any], *,
                  experiment_id: str, run_id: str | None = None,
                  env_manager: str = "local") -> SubmittedRun:
    """Start the entry point of the MLflow Project at ``uri`` (a folder or a git URI) in a
    fresh process; do not wait."""
    use_this_python()
    quiet_library_chatter()  # MLflow Projects' "=== Running command ..." per run
    os.environ.update(launcher_environment())  # the entry point dies with us, even by SIGKILL
    config = {PROJECT_ENV_MANAGER: env_manager, PROJECT_SYNCHRONOUS: True,
              PROJECT_DOCKER_ARGS: None, PROJECT_STORAGE_DIR: None, PROJECT_BUILD_IMAGE: False,
              PROJECT_DOCKER_AUTH: None}
    if run_id is not None:
        config[MLFLOW_LOCAL_BACKEND_RUN_ID_CONFIG] = run_id
    # MLflow makes a folder per run for 'path' params, never removed; ours declare none, so it
    # stays empty and goes as soon as the command has started.
    with tempfile.TemporaryDirectory(prefix="dlaas-project-") as storage, \
            environment_lock(env_manager), bounded_git():
        config[PROJECT_STORAGE_DIR] = storage
        return LocalBackend().run(uri, entry_point,
                                  {k: str(v) for k, v in params.items()}, None, config,
                                  mlflow.get_tracking_uri(), experiment_id)


def wait_for_exit(submitted: SubmittedRun, timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for the entry point's process; returns as soon as it ends."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        submitted.command_proc.wait(timeout=timeout_s)


def wait_exited(submitted: SubmittedRun, timeout_s: float, poll_s: float = 0.05) -> bool:
    """Whether the entry point's process has exited, waiting up to ``timeout_s``; it is left
    unreaped, so that a monitor's last sample still reads it (then call :func:`reap`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if os.waitid(os.P_PID, submitted.command_proc.pid,
                     os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def reap(submitted: SubmittedRun) -> resource.struct_rusage:
    """Reap the exited entry point's process: the kernel's account of its whole tree."""
    _, status, usage = os.wait4(submitted.command_proc.pid, 0)
    submitted.command_proc.returncode = os.waitstatus_to_exitcode(status)
    return usage


def exit_code(submitted: SubmittedRun) -> int | None:
    """The entry point's exit code; None while it runs."""
    return submitted.command_proc.returncode


def end_orphaned_run(client: mlflow.MlflowClient, submitted: SubmittedRun) -> bool:
    """End FAILED, with the reason, a run whose process exited without ending it (killed,
    crashed); returns whether it had to."""
    if exit_code(submitted) == EXIT_UNDELIVERED:
        return False  # its entry ended it, in the run's journal the server has not taken yet
    if client.get_run(submitted.run_id).info.status != "RUNNING":
        return False
    end_run(client, submitted.run_id, "FAILED",
            f"the process ended {submitted.get_status()} without ending its run")
    return True


def stop_project_run(submitted: SubmittedRun, grace_s: float = 10.0) -> None:
    """Terminate the entry point's whole process tree (SIGTERM, then SIGKILL after grace).

    The command runs under ``bash -c``; where bash does not exec it (a virtualenv's
    ``source ... && python ...``), stopping bash alone would leave the workload running.
    """
    stop_process_tree(submitted.command_proc.pid, grace_s)
    submitted.command_proc.wait()
