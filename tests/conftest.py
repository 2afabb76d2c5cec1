"""Shared fixtures: every test tracks into a throw-away SQLite store."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import mlflow
import pytest
from mlflow.environment_variables import MLFLOW_ENV_ROOT

from mlflow_dlaas.hardware import (
    ASSUMED_FLAGS_VARIABLE,
    CPUINFO,
    emulated_bf16_reason,
    framework_flags,
    parse_cpuinfo,
)
from mlflow_dlaas.launch import BUILT_ENVIRONMENTS, environment_lock
from mlflow_dlaas.runs.schema import REASON_TAG
from mlflow_dlaas.store.store_lock import wait_for_sqlite_locks
from mlflow_dlaas.store.store_uri import ACTIVE_ENV, TRACKING_ENV

#: The suite's two workers share two cores. OpenMP threads that spin while they wait (the
#: default policy of PyTorch's libgomp) collapse when two such processes run side by side:
#: two 2-thread PyTorch trainings of LeNet-5 at once train at 450-480 samples/s each, against
#: 7,100 alone and 3,200 each with passive waiting (docs/libraries.md). Every process the suite
#: starts inherits passive waiting, so its own runs do not make each other 15x slower; each
#: run records the variable in its environment, and a setting a test gives wins, as a user's.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def tracking_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite store for the session (creating one costs seconds); tests use own experiments.
    The tests' own connections wait for locks as the product's do."""
    wait_for_sqlite_locks()
    return tmp_path_factory.mktemp("tracking")


@pytest.fixture
def tracking(tracking_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point MLflow at the session store, work in its directory, and yield a fresh experiment."""
    uri = f"sqlite:///{tracking_root / 'mlflow.db'}"
    monkeypatch.chdir(tracking_root)
    monkeypatch.setenv(TRACKING_ENV, uri)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.setenv(ACTIVE_ENV, "0")  # restored afterwards even if code under test sets it
    mlflow.set_tracking_uri(uri)
    name = f"test-{uuid.uuid4().hex[:8]}"
    mlflow.set_experiment(name)
    yield name
    while mlflow.active_run():
        mlflow.end_run()


@pytest.fixture
def cli_path() -> str:
    """The installed console script, so tests launch the real command."""
    path = shutil.which("mlflow-dlaas", path=os.environ.get("PATH"))
    if path is None:
        pytest.skip("the mlflow-dlaas console script is not on PATH; run the tests with make test")
    return path


def runs_of(experiment: str) -> list[mlflow.entities.Run]:
    """Every run of ``experiment`` (by name)."""
    client = mlflow.MlflowClient()
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)


def only_finished_run(experiment: str) -> mlflow.entities.Run:
    """The one run of ``experiment``, which must have FINISHED (else its failure reason)."""
    (run,) = runs_of(experiment)
    assert run.info.status == "FINISHED", run.data.tags.get(REASON_TAG)
    return run


def skip_unless_installed(*modules: str) -> None:
    """Skip, naming them, when any of ``modules`` is not installed here."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed here")


def artifact_text(run_id: str, path: str) -> str:
    """The text of a run's artifact, read from a download that is removed afterwards
    (MLflow downloads into a temp folder it never removes when given no destination)."""
    with tempfile.TemporaryDirectory() as tmp:
        return Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=path,
                                                        dst_path=tmp)).read_text()


ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class CommandResult:
    """A documented command as a user ran it: where, its exit code and both streams."""

    folder: Path
    returncode: int
    stdout: str
    stderr: str

    @property
    def store(self) -> str:
        """The embedded tracking store the command used (``./mlflow.db``)."""
        return f"sqlite:///{self.folder / 'mlflow.db'}"


def user_env(folder: Path) -> dict[str, str]:
    """A new user's shell in ``folder``: the venv activated (its ``bin`` first on PATH, as
    ``make`` and ``. .venv/bin/activate`` do) and no MLflow variable set, so commands use
    the embedded store ``folder/mlflow.db``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MLFLOW_") or k == MLFLOW_ENV_ROOT.name}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = os.environ.get("HOME", str(folder))
    return env


def run_as_user(command: str, folder: Path, timeout: int = 900) -> CommandResult:
    """Run a shell ``command`` in ``folder`` as a user would type it."""
    managers = [m for m in BUILT_ENVIRONMENTS if f"--env-manager {m}" in command]
    done = run_building_environment(["bash", "-c", command], managers[0] if managers else
                                    "local", timeout, cwd=folder, env=user_env(folder))
    return CommandResult(folder, done.returncode, done.stdout, done.stderr)


#: What ``mlflow run`` prints once its environment is ready and the entry point starts.
ENTRY_STARTED = "=== Running command"


def run_building_environment(args: list[str], env_manager: str, timeout: float,
                             **popen: Any) -> subprocess.CompletedProcess[str]:
    """Run ``args`` (an ``mlflow run`` or what starts one) to the end, holding the machine's
    project-environment lock (:func:`~mlflow_dlaas.launch.environment_lock`) until MLflow
    has the environment ready and starts the entry point, as mlflow-dlaas's own launcher
    does: a test on the other worker may be building the same environment."""
    deadline = time.monotonic() + timeout
    with contextlib.ExitStack() as lock:
        lock.enter_context(environment_lock(env_manager))
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, **popen)
        started = threading.Event()
        out: list[str] = []
        err: list[str] = []

        def read(stream: IO[str], into: list[str], watch: bool) -> None:
            for line in stream:
                into.append(line)
                if watch and ENTRY_STARTED in line:
                    started.set()
            if watch:
                started.set()  # the command ended before it started an entry point

        readers = [threading.Thread(target=read, args=(proc.stdout, out, False)),
                   threading.Thread(target=read, args=(proc.stderr, err, True))]
        for reader in readers:
            reader.start()
        started.wait(max(0.0, deadline - time.monotonic()))
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    finally:
        for reader in readers:
            reader.join()
    return subprocess.CompletedProcess(args, proc.returncode, "".join(out), "".join(err))


def user_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A fresh folder that sees the checkout's projects, examples and root MLproject, as a
    user's checkout does (relative paths in the docs resolve), with its own store."""
    folder = tmp_path_factory.mktemp(name)
    for entry in ("projects", "examples", "MLproject"):
        (folder / entry).symlink_to(ROOT / entry)
    return folder


#: The test whose setup runs the demo (the first of the demo's group).
DEMO_TEST = "test_the_demo_exits_0_without_a_traceback"


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> CommandResult:
    """``mlflow-dlaas demo`` exactly as ``make demo`` runs it (the main job), once a session,
    in a fresh folder with a fresh embedded store; other tests read its runs and report."""
    if shutil.which("mlflow-dlaas", path=user_env(ROOT)["PATH"]) is None:
        pytest.skip("the mlflow-dlaas console script is not on PATH; run the tests with make test")
    # about 11 min quiet on a 2-core AVX2 EPYC; under the suite's other two workers there,
    # 1,500 s was not enough for the demo before its serving screen (docs/performance.md)
    return run_as_user("mlflow-dlaas demo", user_folder(tmp_path_factory, "demo"), timeout=2700)


#: The documented study (docs/studies.md), constrained, that other tests read.
THREADING_STUDY = "mlflow-dlaas study examples/threading_pytorch.yaml"


@pytest.fixture(scope="session")
def threading_study(tmp_path_factory: pytest.TempPathFactory) -> CommandResult:
    """:data:`THREADING_STUDY` as written, once a session, in a fresh folder and store."""
    return run_as_user(THREADING_STUDY, user_folder(tmp_path_factory, "threading"), 900)


#: The documented study over the user's own project (docs/studies.md, "Your own project").
OWN_PROJECT_STUDY = "mlflow-dlaas study examples/own_project_study.yaml"


@pytest.fixture(scope="session")
def own_project_study(tmp_path_factory: pytest.TempPathFactory) -> CommandResult:
    """:data:`OWN_PROJECT_STUDY` as written, once a session, in a fresh folder and store."""
    return run_as_user(OWN_PROJECT_STUDY, user_folder(tmp_path_factory, "own-project"), 900)



#: Session fixtures that make real runs: the tests that share one run on one xdist worker
#: (``make test`` runs two), so that each is made once a session.
SHARED_SESSION_FIXTURES = {"demo": "demo", "threading_study": "threading",
                           "own_project_study": "own_project",
                           "measured": "report-runs", "report_dir": "report-runs"}


def _xdist_group(item: pytest.Item) -> str | None:
    """The group whose tests must share a worker: a costly session fixture's, or the
    module's where it holds a module-scoped fixture (made once per worker otherwise)."""
    definitions = item._fixtureinfo.name2fixturedefs  # the fixtures this test will get
    for name in item.fixturenames:
        if name in SHARED_SESSION_FIXTURES:
            return SHARED_SESSION_FIXTURES[name]
    params = getattr(getattr(item, "callspec", None), "params", {})
    where = _documented_command_folder(str(params.get("command", "")))
    if where in ("demo", "threading", "own_project"):
        return where
    if any(d[-1].scope == "module" for n, d in definitions.items() if d):
        return item.module.__name__
    return None


def _documented_command_folder(command: str) -> str | None:
    if not command:
        return None
    from tests.project.test_documented_commands import RUN_AS_WRITTEN

    return RUN_AS_WRITTEN.get(command)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Closes the log (``-q`` hides the header) with the CPU the suite saw."""
    terminalreporter.write_sep("-", "the CPU this suite ran on")
    for line in cpu_lines():
        terminalreporter.write_line(line)


def cpu_lines() -> list[str]:
    """The CPU the suite saw, and which branch of each CPU-dependent test runs for real
    (the other branch runs with its detection assumed: DLAAS_ASSUME_CPU_FLAGS)."""
    fields = parse_cpuinfo(CPUINFO.read_text() if CPUINFO.exists() else "")
    flags = (fields.get("flags") or fields.get("Features") or "").split()
    bf16 = emulated_bf16_reason(flags)
    return [f"cpu: {fields.get('model name', 'unknown')}, {os.cpu_count()} cores; framework "
            f"flags: {', '.join(framework_flags(flags)) or 'none'}",
            "cpu branches: bf16 " + ("emulated here: the native branch runs assumed"
                                     if bf16 else "native here: the emulated branch runs "
                                                  "assumed")
            + f"; AMX {'present' if 'amx_bf16' in flags else 'absent'}"
            + (f"; every decision assumes {ASSUMED_FLAGS_VARIABLE}="
               f"{os.environ[ASSUMED_FLAGS_VARIABLE]}"
               if ASSUMED_FLAGS_VARIABLE in os.environ else "")]


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that share a costly fixture with one ``xdist_group`` each (``--dist
    loadgroup``: a group runs on one worker)."""
    for item in items:
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # the demo's own test first in its group: its setup is the demo, timed as the demo's
    items.sort(key=lambda item: item.name != DEMO_TEST)

