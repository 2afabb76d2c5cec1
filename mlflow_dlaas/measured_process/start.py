"""Start the measured worker: its environment, affinity, pipes and scratch folder.

Light on purpose (no MLflow): a training entry starts its worker before it imports MLflow,
so that the framework's import in the worker and MLflow's in the entry overlap. The worker
holds before its first measured phase until the entry, its monitor running, says ``go``
(:meth:`~mlflow_dlaas.measured_process.channel.WorkerChannel.wait_until_watched`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from mlflow_dlaas.measured_process.channel import (
    CHECKPOINTS_ENV,
    CONFIG_FILE,
    CONTROL_FD_ENV,
    DIR_ENV,
    FD_ENV,
)
from mlflow_dlaas.measured_process.lifeline import die_with_parent, stop_process_tree
from mlflow_dlaas.measured_process.scratch import scratch_dir
from mlflow_dlaas.runs.validity import ValidityThresholds

STOP_GRACE_S = 5.0


@dataclass(frozen=True)
class WorkerLaunch:
    """How to start one measured worker and what to judge of it.

    ``environment``: variables added to ours (threads, library settings) before it starts;
    ``measured_phases``: judged for validity; ``headline_phases``: their peak RSS, CPU
    seconds and energy are the run's ``measured_*`` figures; ``stall_timeout_s``: longest
    silence before it is stopped.
    """

    module: str
    #: the entry's validated configuration as params (JSON values), which the worker reads
    #: from :data:`~mlflow_dlaas.measured_process.channel.CONFIG_FILE`
    config: Mapping[str, Any]
    environment: dict[str, str]
    cpu_affinity: tuple[int, ...] | None
    measured_phases: tuple[str, ...]
    headline_phases: tuple[str, ...]
    monitor_interval_s: float
    stall_timeout_s: float
    thresholds: ValidityThresholds = field(default_factory=ValidityThresholds)
    #: after each epoch, ``checkpoint(step, metrics)``: None to go on, or why the worker must
    #: stop before the next epoch (it then raises :class:`WorkerStopped`); None: no waiting
    checkpoint: Callable[[int, Mapping[str, float]], str | None] | None = None


class StartedWorker:
    """A running measured worker: its process, the read end of its reports, the write end
    of its answers, and its scratch folder. Closing it stops a worker still running and
    removes the folder."""

    def __init__(self, launch: WorkerLaunch) -> None:
        self._scratch = scratch_dir("run")
        self.workdir = Path(self._scratch.name)
        self.started_wall_s = 0.0
        self._lock = threading.Lock()
        self._reports_fd, report_write = os.pipe()
        control_read, control_write = os.pipe()
        self._answers = os.fdopen(control_write, "w", buffering=1)
        try:
            self.proc = self._popen(launch, report_write, control_read)
        except BaseException:
            os.close(self._reports_fd)
            self._answers.close()
            self._scratch.cleanup()
            raise
        finally:
            os.close(report_write)
            os.close(control_read)

    def _popen(self, launch: WorkerLaunch, report_fd: int, control_fd: int
               ) -> subprocess.Popen[bytes]:
        env = {**os.environ, **launch.environment, FD_ENV: str(report_fd),
               CONTROL_FD_ENV: str(control_fd), DIR_ENV: str(self.workdir),
               "PYTHONUNBUFFERED": "1"}
        if launch.checkpoint is not None:
            env[CHECKPOINTS_ENV] = "1"
        parent, cores = os.getpid(), launch.cpu_affinity

        def before_exec() -> None:  # in the child: pinned and tied to us before any import
            die_with_parent(parent)
            if cores is not None:
                os.sched_setaffinity(0, cores)

        (self.workdir / CONFIG_FILE).write_text(json.dumps(dict(launch.config), default=str))
        self.started_wall_s = time.time()
        return subprocess.Popen([sys.executable, "-m", launch.module], env=env,
                                pass_fds=(report_fd, control_fd), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, preexec_fn=before_exec)

    def take_reports(self) -> int:
        """The read end of the worker's reports; the caller closes it."""
        fd, self._reports_fd = self._reports_fd, -1
        return fd

    def answer(self, line: str) -> None:
        """Send ``go`` or ``stop`` to a worker waiting for it (one that died meanwhile says
        why by its exit)."""
        with self._lock, contextlib.suppress(BrokenPipeError, ValueError):
            self._answers.write(line + "\n")

    def close(self) -> None:
        """Stop the worker if it still runs; close our ends; remove the scratch folder (again:
        a no-op)."""
        if self.proc.poll() is None:
            stop_process_tree(self.proc.pid, STOP_GRACE_S)
            self.proc.wait()
        with self._lock, contextlib.suppress(OSError):
            self._answers.close()
        if self._reports_fd >= 0:
            os.close(self._reports_fd)
            self._reports_fd = -1
        self._scratch.cleanup()

    def __enter__(self) -> StartedWorker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
