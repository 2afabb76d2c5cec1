"""The entry side: start the measured worker, monitor it from outside, log what it reports.

The worker's phases, metrics, params, tags and files arrive over a pipe; a reader thread
only marks phase edges on the monitor (so boundaries are placed within a sample's time),
while this thread does the MLflow calls. A worker that crashes, is killed or stops
reporting ends the run FAILED with its reason and output tail; the samples up to then are
logged in every case.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse
from urllib.request import url2pathname

import mlflow

from mlflow_dlaas.console_log import console, verbose
from mlflow_dlaas.errors import WorkloadError, error_from_record
from mlflow_dlaas.measured_process.channel import Checkpoints, Message, decode
from mlflow_dlaas.measured_process.lifeline import check_for_stop, stop_process_tree
from mlflow_dlaas.measured_process.start import STOP_GRACE_S, StartedWorker, WorkerLaunch
from mlflow_dlaas.monitor import MonitorResult, ResourceMonitor
from mlflow_dlaas.monitor.timeline_plot import prepare_plotting
from mlflow_dlaas.parallelism import available_cores
from mlflow_dlaas.redaction import redact_text
from mlflow_dlaas.runs.curation import curated_validity, headline_figures, split_details
from mlflow_dlaas.runs.schema import (
    WORKER_KERNEL_CPU_TIME,
)
from mlflow_dlaas.runs.validity import ValidityVerdict, judge
from mlflow_dlaas.store.dataset_input import log_dataset_input
from mlflow_dlaas.store.lifecycle import log_new_params

log = console(__name__)

TAIL_LINES = 40
#: the worker's last lines kept for the run's log (its console shows fewer: :data:`OWN_LINE`)
KEPT_LINES = 2000
#: Lines the console shows by default: mlflow-dlaas's own log lines and messages.
OWN_LINE = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) (__main__|mlflow_dlaas[\w.]*): "
                      r"|mlflow-dlaas")
OUTPUT_ARTIFACT = "worker/output_tail.txt"
#: Every statistic of the run that is not a metric: the workload's details, the validity
#: figures and the monitor's whole summary.
SUMMARY_ARTIFACT = "summary.json"


class WorkerFailed(WorkloadError):
    """The measured worker crashed, was killed or stopped reporting."""


class WorkerStopped(WorkloadError):
    """The entry stopped the worker at a checkpoint (a pruned trial): the run ends KILLED."""

    run_status = "KILLED"


@dataclass(frozen=True)
class WorkerOutcome:
    """What the worker returned, what the monitor saw, and the run's verdict."""

    result: dict[str, Any]
    monitor: MonitorResult
    verdict: ValidityVerdict


def run_worker(launch: WorkerLaunch, run_id: str,
               started: StartedWorker | None = None) -> WorkerOutcome:
    """Run ``launch`` to its end inside MLflow run ``run_id`` (the active run); ``started``:
    the worker, where the entry started it early (before importing MLflow)."""
    with started or StartedWorker(launch) as worker:
        return _Supervision(launch, run_id, worker).run()


def log_artifacts_whole(local: Path, artifact_path: str) -> None:
    """Log the folder ``local`` as ``artifact_path``, or nothing: a copy into a local artifact
    store that fails half-way (a full disk) is removed, so that no run holds part of a
    model."""
    uri = urlparse(mlflow.get_artifact_uri(artifact_path))
    destination = Path(url2pathname(uri.path)) if uri.scheme in ("", "file") else None
    new = destination is not None and bool(artifact_path) and not destination.exists()
    try:
        mlflow.log_artifacts(str(local), artifact_path)
    except BaseException:
        if new:
            shutil.rmtree(destination, ignore_errors=True)
        raise


class _Supervision:
    def __init__(self, launch: WorkerLaunch, run_id: str, worker: StartedWorker) -> None:
        self.launch, self.run_id, self.worker = launch, run_id, worker
        self.workdir = worker.workdir
        self.inbox: queue.Queue[Message | None] = queue.Queue()
        self.output: collections.deque[str] = collections.deque(maxlen=KEPT_LINES)
        self.result: dict[str, Any] = {}
        self.details: dict[str, Any] = {}
        self.error: Message | None = None
        self.checkpoints = None if launch.checkpoint is None else \
            Checkpoints(launch.checkpoint, worker.answer)

    def run(self) -> WorkerOutcome:
        proc = self.worker.proc
        prepare_plotting()  # its import is never inside a measured phase
        monitor = ResourceMonitor(run_id=self.run_id, interval_s=self.launch.monitor_interval_s,
                                  pid=proc.pid)
        usage = None
        tee = threading.Thread(target=self._tee, args=(proc.stdout,), daemon=True)
        try:
            monitor.start()
            tee.start()
            threading.Thread(target=self._read, args=(self.worker.take_reports(), monitor),
                             daemon=True).start()
            self._dispatch_until_closed(proc)
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
            result = monitor.stop()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        except BaseException:
            stop_process_tree(proc.pid, STOP_GRACE_S)
            monitor.stop()
            raise
        finally:
            if tee.is_alive():  # the output tail is complete once the pipe closes
                tee.join(timeout=STOP_GRACE_S)
            self._log_output()
        self._log_kernel_accounting(usage)
        self._raise_if_failed(proc.returncode)
        verdict = self._judge(result)
        mlflow.log_dict({"workload": self.details, "validity": verdict.figures,
                         "monitor": result.summary}, SUMMARY_ARTIFACT)
        return WorkerOutcome(self.result, result, verdict)

    def _tee(self, stream: IO[bytes]) -> None:
        """Keep every line for the run's log; show ours on the console (all with
        :data:`~mlflow_dlaas.console_log.VERBOSE_ENV`): TensorFlow's absl and oneDNN notes,
        progress bars and library warnings stay in ``worker/output_tail.txt``."""
        show_all = verbose()
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace")
            self.output.append(line)
            own = OWN_LINE.match(line)
            if show_all or own:  # our progress lines without their "INFO __main__: "
                sys.stderr.write(line[own.end():] if own and own.group(1) == "INFO" else line)
        sys.stderr.flush()

    def _read(self, fd: int, monitor: ResourceMonitor) -> None:
        with os.fdopen(fd) as lines:
            for line in lines:
                try:
                    message = decode(line)
                except ValueError:
                    continue  # a torn line from a killed worker
                if message.kind == "phase":
                    edge = monitor.begin_phase if message.body["edge"] == "start" else \
                        monitor.end_phase
                    edge(message.body["name"], at_wall_s=message.body.get("t"))
                elif message.kind == "ready":  # the monitor runs: the worker may measure
                    self.worker.answer("go")
                else:
                    self.inbox.put(message)
        self.inbox.put(None)

    def _dispatch_until_closed(self, proc: subprocess.Popen[bytes]) -> None:
        last = time.monotonic()
        while True:
            check_for_stop()  # a SIGTERM Python dropped must still end the run
            try:
                message = self.inbox.get(timeout=1.0)
            except queue.Empty:
                silent = time.monotonic() - last
                if silent > self.launch.stall_timeout_s and proc.poll() is None:
                    stop_process_tree(proc.pid, STOP_GRACE_S)
                    raise WorkerFailed(
                        f"the measured worker reported nothing for {silent:.0f} s (limit "
                        f"stall_timeout_s={self.launch.stall_timeout_s:g}) and was stopped; "
                        f"its last output:\n{self._tail()}") from None
                continue
            if message is None:
                return
            last = time.monotonic()
            self._log(message)

    def _log(self, message: Message) -> None:
        body = message.body
        if message.kind == "metrics":
            logged, details = split_details(body["values"], body.get("step") is not None)
            mlflow.log_metrics(logged, step=body.get("step"))
            for key, value in details.items():
                if body.get("step") is None:
                    self.details[key] = value
                else:  # a history: one value per step (batch size, offered load)
                    self.details.setdefault(key, {})[str(body["step"])] = value
        elif message.kind == "dataset":
            log_dataset_input(body)
        elif message.kind == "params":
            log_new_params(self.run_id, body["values"])
        elif message.kind == "tags":
            mlflow.set_tags(body["values"])
        elif message.kind == "artifacts":
            local = Path(body["path"]).resolve()
            if self.workdir.resolve() in local.parents:  # only files of this run's folder
                log_artifacts_whole(local, body["artifact_path"])
        elif message.kind == "result":
            self.result.update(body)
        elif message.kind == "error":
            self.error = message
        if self.checkpoints is not None:
            self.checkpoints.saw(message)

    def _raise_if_failed(self, returncode: int) -> None:
        if self.checkpoints is not None and self.checkpoints.stop_reason is not None:
            raise WorkerStopped(self.checkpoints.stop_reason)
        if self.error is not None:
            raise error_from_record(self.error.body)
        if returncode != 0:
            how = (f"was killed by {signal.Signals(-returncode).name}" if returncode < 0
                   else f"exited with code {returncode}")
            hint = " (out of memory?)" if returncode == -signal.SIGKILL else ""
            raise WorkerFailed(f"the measured worker {how}{hint}; its last output:\n"
                               f"{self._tail()}")

    def _judge(self, result: MonitorResult) -> ValidityVerdict:
        cores = len(self.launch.cpu_affinity or ()) or available_cores()
        verdict = judge(result.summary, self.launch.measured_phases, cores,
                        self.launch.thresholds)
        mlflow.set_tags(verdict.tags())
        mlflow.log_metrics({**curated_validity(verdict.figures),
                            **headline_figures(result.summary, self.launch.headline_phases)})
        return verdict

    def _log_kernel_accounting(self, usage: Any) -> None:
        """The kernel's CPU time of the worker's whole life (saving included)."""
        if usage is not None:
            mlflow.log_metric(WORKER_KERNEL_CPU_TIME, usage.ru_utime + usage.ru_stime)

    def _tail(self) -> str:
        return redact_text("".join(list(self.output)[-TAIL_LINES:])).rstrip() or "(no output)"

    def _log_output(self) -> None:
        try:
            mlflow.log_text(redact_text("".join(self.output)) or "(no output)\n", OUTPUT_ARTIFACT)
        except Exception as e:  # the run's outcome matters more than its log
            log.info(f"mlflow-dlaas: could not log the worker's output: {e}")
