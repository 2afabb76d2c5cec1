"""The measured worker: lean, with the settings in force, and failing runs that say why."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import mlflow
import psutil
import pytest

from mlflow_dlaas.measured_process.scratch import sweep_dead_owners
from mlflow_dlaas.runs.schema import REASON_TAG
from tests.conftest import artifact_text, runs_of

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--model", "lenet5", "--dataset", "mnist5k", "--batch_size", "64",
         "--warmup_steps", "0", "--log_model", "false", "--monitor_interval", "0.1"]


def _entry(kind: str, experiment: str, args: list[str]) -> subprocess.Popen[str]:
    """The entry point as a project runs it, in a run of ``experiment``."""
    env = {**os.environ, "MLFLOW_EXPERIMENT_NAME": experiment, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", f"mlflow_dlaas.workloads.{kind}", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _worker_of(entry: subprocess.Popen[str], timeout_s: float = 120) -> psutil.Process:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in psutil.Process(entry.pid).children():
            with contextlib.suppress(psutil.Error):  # e.g. a finished helper not yet reaped
                if "_worker" in " ".join(child.cmdline()):
                    return child
        time.sleep(0.1)
    raise AssertionError("no measured worker started")


def _wait_for_phase(worker: psutil.Process, seconds: float) -> None:
    """Let the worker import its framework and start training (its CPU time grows)."""
    deadline = time.monotonic() + 120
    while sum(worker.cpu_times()[:2]) < seconds and time.monotonic() < deadline:
        time.sleep(0.2)


def _wait_for_run(experiment: str) -> None:
    deadline = time.monotonic() + 120
    while not runs_of(experiment) and time.monotonic() < deadline:
        time.sleep(0.2)


def _running(process: psutil.Process) -> bool:
    """Alive and not a zombie (a dead child its new parent has not reaped yet)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _has_metric(experiment: str, key: str) -> bool:
    runs = runs_of(experiment)
    return bool(runs) and key in runs[0].data.metrics


def test_the_worker_imports_no_harness() -> None:
    probe = ("import sys, mlflow_dlaas.workloads.train_worker, "
             "mlflow_dlaas.workloads.infer_worker\n"
             "print(sorted(m for m in ('mlflow', 'sqlalchemy', 'alembic', 'pandas', "
             "'matplotlib', 'optuna') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_blas_threads_is_in_force_in_every_pool(tracking: str, framework: str) -> None:
    entry = _entry("train", tracking, ["--framework", framework, *QUICK, "--max_steps", "3",
                                       "--blas_threads", "1"])
    _, err = entry.communicate(timeout=600)
    assert entry.returncode == 0, err[-3000:]
    (run,) = runs_of(tracking)
    pools = {k: v for k, v in run.data.params.items()
             if k.startswith("in_force_blas_") and k.endswith("_threads")}
    assert pools, "no BLAS pool was read back from the worker"
    assert set(pools.values()) == {"1"}, pools


@pytest.mark.slow
def test_a_killed_worker_fails_the_run_with_its_reason_and_keeps_the_samples(
        tracking: str) -> None:
    entry = _entry("train", tracking, ["--framework", "pytorch", *QUICK, "--epochs", "50"])
    worker = _worker_of(entry)
    client, series = mlflow.MlflowClient(), "system/process_tree_rss_megabytes"
    deadline = time.monotonic() + 120  # the monitor watches the tree and flushed once
    while not _has_metric(tracking, series) and time.monotonic() < deadline:
        time.sleep(0.2)
    flushed = len(client.get_metric_history(runs_of(tracking)[0].info.run_id, series))
    time.sleep(1.0)  # samples the monitor holds, not yet sent
    worker.send_signal(signal.SIGKILL)
    _, err = entry.communicate(timeout=120)
    assert entry.returncode != 0
    (run,) = runs_of(tracking)
    assert run.info.status == "FAILED"
    reason = run.data.tags[REASON_TAG]
    assert "killed by SIGKILL" in reason and "last output" in reason
    assert len(client.get_metric_history(run.info.run_id, series)) > flushed >= 1
    assert "worker/output_tail.txt" in [a.path for a in client.list_artifacts(
        run.info.run_id, "worker")]


@pytest.mark.slow
def test_a_silent_worker_is_stopped_after_the_stall_timeout(tracking: str) -> None:
    # an MLP on 8x8 digits reports an epoch every second or two, until it is stopped
    entry = _entry("train", tracking, ["--framework", "pytorch", "--model", "mlp", "--dataset",
                                       "digits", "--epochs", "1000000", "--log_model", "false",
                                       "--stall_timeout_s", "5"])
    worker = _worker_of(entry)
    deadline = time.monotonic() + 120
    while not _has_metric(tracking, "test_accuracy") and time.monotonic() < deadline:
        time.sleep(0.2)
    worker.suspend()
    _, err = entry.communicate(timeout=120)
    (run,) = runs_of(tracking)
    assert run.info.status == "FAILED"
    assert "reported nothing for" in run.data.tags[REASON_TAG]
    assert not psutil.pid_exists(worker.pid) or worker.status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_sigterm_to_the_entry_kills_the_run_and_its_worker(tracking: str) -> None:
    entry = _entry("train", tracking, ["--framework", "pytorch", *QUICK, "--epochs", "50"])
    worker = _worker_of(entry)
    _wait_for_phase(worker, 2.0)
    _wait_for_run(tracking)  # the worker starts before the entry has imported MLflow
    entry.send_signal(signal.SIGTERM)
    _, err = entry.communicate(timeout=60)
    assert entry.returncode == 128 + signal.SIGTERM, err  # one line, as a shell reports a signal
    assert "mlflow-dlaas train: stopped by signal SIGTERM" in err and "Traceback" not in err
    (run,) = runs_of(tracking)
    assert run.info.status == "KILLED"
    with pytest.raises(psutil.NoSuchProcess):
        worker.wait(timeout=10)
        worker.status()


@pytest.mark.slow
def test_sigkill_of_the_entry_takes_the_process_ensemble_with_it(tracking: str) -> None:
    entry = _entry("infer", tracking, ["--runtime", "onnxruntime", "--scenarios", "ensemble",
                                       "--ensemble_mode", "processes", "--ensemble_size", "2",
                                       "--min_duration_s", "120", "--monitor_interval", "0.1"])
    worker = _worker_of(entry)
    deadline = time.monotonic() + 120
    while len(worker.children(recursive=True)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    tree = [worker, *worker.children(recursive=True)]
    assert len(tree) >= 3, "the ensemble members did not start"
    scratch = f"dlaas-run-{entry.pid}-*"
    assert list(Path(tempfile.gettempdir()).glob(scratch)), "the entry made no scratch folder"
    entry.kill()
    entry.communicate(timeout=30)
    time.sleep(2)
    alive = [p for p in tree if _running(p)]
    assert alive == [], f"still running two seconds after the entry died: {alive}"
    sweep_dead_owners()  # what the next run on this machine does (another may have already)
    assert not list(Path(tempfile.gettempdir()).glob(scratch))


@pytest.fixture
def co_tenant() -> Iterator[None]:
    """Another process busy on every core, as a noisy neighbour would be."""
    code = "while True: pass"
    burners = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in burners:
            p.kill()
            p.wait()


@pytest.mark.slow
def test_a_run_beside_a_busy_co_tenant_is_disturbed_with_the_reason(
        tracking: str, co_tenant: None) -> None:
    entry = _entry("train", tracking, ["--framework", "pytorch", *QUICK, "--epochs", "1"])
    _, err = entry.communicate(timeout=600)
    assert entry.returncode == 0, err[-3000:]
    (run,) = runs_of(tracking)
    assert run.data.tags["dlaas.validity"] == "disturbed"
    assert "other processes used" in run.data.tags["dlaas.validity_reason"]


class CoLoad:
    """The cores other processes used while a block ran, measured by the test itself from
    the kernel's machine-wide busy time less this process tree's CPU time (short-lived
    processes of another test count too), sampled every :attr:`SLICE_S` and read back over
    a span of wall-clock time (:meth:`between`)."""

    SLICE_S = 0.5

    def __enter__(self) -> CoLoad:
        self.samples = [self._sample()]
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._run, daemon=True)
        self._sampler.start()
        return self

    def _run(self) -> None:
        while not self._done.wait(self.SLICE_S):
            self.samples.append(self._sample())

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._sampler.join()
        self.samples.append(self._sample())

    def between(self, start: float, end: float) -> tuple[float, float]:
        """(cores over the samples that cover ``start``-``end`` in wall-clock seconds, the
        busiest slice among them)."""
        lo = max([i for i, s in enumerate(self.samples) if s[0] <= start], default=0)
        hi = min([i for i, s in enumerate(self.samples) if s[0] >= end],
                 default=len(self.samples) - 1)
        covering = self.samples[lo:hi + 1]
        rates = [self._others(a, b) for a, b in zip(covering, covering[1:], strict=False)
                 if b[0] - a[0] > 0.05]
        whole = self._others(covering[0], covering[-1])
        return whole, max(rates, default=whole)

    @staticmethod
    def _others(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
        return max(0.0, (b[1] - a[1]) - (b[2] - a[2])) / (b[0] - a[0])

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        """(wall-clock time, machine busy CPU seconds, this tree's CPU seconds)."""
        machine = psutil.cpu_times()
        busy = machine.user + machine.nice + machine.system + machine.irq + machine.softirq
        me = psutil.Process()
        own = sum(me.cpu_times()[:4])  # ourselves, and the children we have reaped
        for child in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                own += sum(child.cpu_times()[:4])
        return time.time(), busy, own


@pytest.mark.slow
def test_a_quiet_run_is_valid_and_reports_the_train_phase_peak(tracking: str) -> None:
    """The verdict agrees with the co-load the test measures: valid when the machine was
    quiet, disturbed by other processes when it was busy (CI shares its machine)."""
    with CoLoad() as co_load:
        entry = _entry("train", tracking, ["--framework", "pytorch", *QUICK, "--epochs", "1"])
        _, err = entry.communicate(timeout=600)
    assert entry.returncode == 0, err[-3000:]
    (run,) = runs_of(tracking)
    verdict, reason = run.data.tags["dlaas.validity"], run.data.tags["dlaas.validity_reason"]
    # the span the run's monitor sampled, which its verdict judged (the entry's start-up,
    # when the other pytest worker may be busy, is outside it)
    wall = [float(line.split(",")[1]) for line in
            artifact_text(run.info.run_id, "monitor/timeline.csv").splitlines()[1:]]
    cores, peak_cores = co_load.between(wall[0], wall[-1])
    if peak_cores < 0.1:
        assert verdict == "valid", f"{reason} (the test measured {peak_cores:.2f} cores at most)"
    elif cores > 0.6:
        assert verdict == "disturbed" and "other processes" in reason, (
            f"{verdict}: {reason} (the test measured {cores:.2f} cores)")
    metrics = run.data.metrics
    assert metrics["Headline/peak_memory_megabytes"] == metrics["train/peak_proc_rss_megabytes"]
    assert metrics["Headline/peak_memory_megabytes"] <= metrics["run/peak_proc_rss_megabytes"]
    # the worker started before the entry's monitor (their imports overlap), held until the
    # monitor watched it, and only then measured; its load phase keeps its own clock's span
    phases = json.loads(artifact_text(run.info.run_id, "monitor/summary.json"))["phases"]
    assert min(p["start_s"] for p in phases if p["name"] in ("train", "eval", "test")) >= 0
    (load,) = [p for p in phases if p["name"] == "load"]
    assert load["end_s"] - load["start_s"] == pytest.approx(metrics["load/duration_seconds"])
