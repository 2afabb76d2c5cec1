"""A process tree that mlflow-dlaas did not write, watched from outside into its MLflow run:
resources (the monitor), phases the user's code marks, the parallel libraries mapped into its
processes, the validity verdict and the headline figures.

From outside, ``/proc/PID/maps`` shows which OpenMP runtime, allocator and BLAS files are
mapped; which of them serves a call can only be asked inside the process (the built-in
workloads do, :mod:`mlflow_dlaas.libraries.readback`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import mlflow
import psutil
from mlflow.entities import Metric, RunTag

from mlflow_dlaas.console_log import console
from mlflow_dlaas.environment import as_tags, fingerprint
from mlflow_dlaas.libraries.readback import mapped_files, parallel_libraries
from mlflow_dlaas.libraries.settings import library_file
from mlflow_dlaas.measured_process.lifeline import adopt_orphans, stop_strays
from mlflow_dlaas.monitor.resource_monitor import DEFAULT_INTERVAL_S, ResourceMonitor
from mlflow_dlaas.monitor.timeline import MonitorResult
from mlflow_dlaas.own_project.phase_marks import PHASE_FILE_ENV
from mlflow_dlaas.own_project.settings import pinned_children
from mlflow_dlaas.parallelism import ParallelismSettings, available_cores
from mlflow_dlaas.redaction import redact_command
from mlflow_dlaas.runs.curation import curated_validity, headline_figures
from mlflow_dlaas.runs.schema import MAPPED_TAG, RUN_PHASE
from mlflow_dlaas.runs.validity import ValidityThresholds, ValidityVerdict, judge

log = console(__name__)

READBACK_ARTIFACT = "libraries/readback.json"
SUMMARY_ARTIFACT = "summary.json"
#: How often the phase marks are read (an edge lands on the monitor this late at most).
PHASES_EVERY_S = 0.02
#: How often the tree's memory maps are read.
MAPS_EVERY_S = 0.5
OUTSIDE_NOTE = ("read from outside (/proc/PID/maps): which parallel libraries are mapped into "
                "the process; which one serves a call is known only inside it")


@dataclass
class _Mapped:
    """The parallel libraries seen mapped in each process of the tree."""

    by_pid: dict[int, set[str]] = field(default_factory=dict)
    commands: dict[int, str] = field(default_factory=dict)

    def read(self, root: int) -> None:
        try:
            tree = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
        except psutil.Error:
            return
        for proc in tree:
            with contextlib.suppress(OSError, psutil.Error):
                found = {os.path.realpath(p) for p in parallel_libraries(mapped_files(proc.pid))}
                self.by_pid.setdefault(proc.pid, set()).update(found)
                if proc.pid not in self.commands:
                    self.commands[proc.pid] = " ".join(redact_command(proc.cmdline()))[:300]

    def main_process(self) -> int | None:
        """The process with the most parallel libraries mapped: the one doing the work."""
        if not self.by_pid:
            return None
        return max(self.by_pid, key=lambda pid: (len(self.by_pid[pid]), pid))


@dataclass(frozen=True)
class WatchOutcome:
    """What the watch found: the verdict, and the asked settings the process did not take."""

    verdict: ValidityVerdict
    problems: tuple[str, ...]
    result: MonitorResult


class OutsideWatch:
    """Watch a process (and its descendants), started with ``settings``, into its MLflow run.
    Give the process :meth:`environment` and start it inside :meth:`launching`; call
    :meth:`start` as soon as it runs, and :meth:`finish` once it has exited and before it is
    reaped."""

    def __init__(self, settings: ParallelismSettings, *,
                 interval_s: float = DEFAULT_INTERVAL_S,
                 thresholds: ValidityThresholds | None = None) -> None:
        self.run_id = ""
        self.settings = settings
        self.interval_s = interval_s
        self.thresholds = thresholds or ValidityThresholds()
        self._folder = tempfile.TemporaryDirectory(prefix="dlaas-watch-")
        self.phase_file = Path(self._folder.name, "phases.jsonl")
        self._phase_offset = 0
        self._phases_seen: list[str] = []
        self._mapped = _Mapped()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._monitor: ResourceMonitor | None = None
        self._guard: subprocess.Popen[bytes] | None = None
        self._ours: set[int] = set()  # our descendants before the command started
        self._pid = 0

    def environment(self) -> dict[str, str]:
        """What the watched process needs to mark its phases."""
        return {PHASE_FILE_ENV: str(self.phase_file)}

    def launching(self) -> contextlib.AbstractContextManager[None]:
        """Around the process's start: pinned to the asked cores (it inherits the mask)."""
        return pinned_children(self.settings)

    def start(self, run_id: str, pid: int) -> None:
        """Begin watching ``pid`` into run ``run_id``; tag it with this machine's fingerprint."""
        self.run_id, self._pid = run_id, pid
        # the monitor first: its first sample is the whole run's baseline, and the CPU the
        # process spends before it is counted by no phase (seconds on a busy machine)
        self._monitor = ResourceMonitor(run_id=self.run_id, interval_s=self.interval_s, pid=pid)
        self._monitor.start()
        mlflow.MlflowClient().log_batch(self.run_id, tags=[
            RunTag(k, v) for k, v in as_tags(fingerprint()).items()])
        adopt_orphans()  # a daemon the command leaves behind is reparented to us
        self._ours = _descendants(os.getpid()) - _descendants(pid) - {pid}
        self._guard = subprocess.Popen(  # stops the tree if we die, even by SIGKILL
            [sys.executable, "-m", "mlflow_dlaas.own_project.guardian", str(os.getpid()),
             str(pid)], stdin=subprocess.DEVNULL)
        self._thread = threading.Thread(target=self._loop, name="dlaas-outside", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        next_maps = 0.0
        while not self._stop.wait(PHASES_EVERY_S):
            self._read_phases()
            if time.monotonic() >= next_maps and not self._stop.is_set():
                self._mapped.read(self._pid)
                next_maps = time.monotonic() + MAPS_EVERY_S

    def _read_phases(self) -> None:
        """Mark on the monitor the phase edges the process wrote since the last read."""
        if self._monitor is None or not self.phase_file.exists():
            return
        with self.phase_file.open() as f:
            f.seek(self._phase_offset)
            for line in iter(f.readline, ""):
                if not line.endswith("\n"):
                    break  # still being written: read it next time
                self._phase_offset += len(line.encode())
                with contextlib.suppress(ValueError, KeyError):
                    mark = json.loads(line)
                    self._edge(mark["name"], mark["edge"], float(mark["t"]))

    def _edge(self, name: str, edge: str, at: float) -> None:
        if edge == "start":
            self._monitor.begin_phase(name, at_wall_s=at)
            self._phases_seen.append(name)
        elif edge == "end":
            with contextlib.suppress(KeyError):  # an end without its start
                self._monitor.end_phase(name, at_wall_s=at)

    def stop(self) -> MonitorResult | None:
        """Stop watching (the process is gone or given up); idempotent."""
        self._stop.set()
        if self._guard is not None:  # the tree ended or was stopped: the guard stands down
            self._guard.kill()
            self._guard.wait()
            left = stop_strays(self._ours | {self._pid})  # what it left running ends too
            if left:
                log.info(f"mlflow-dlaas: stopped {len(left)} process(es) the command left "
                         f"running: {'; '.join(left)}")
        if self._thread is not None:
            self._thread.join()
        result = None
        if self._monitor is not None:
            self._read_phases()
            result = self._monitor.stop()
        self._folder.cleanup()
        return result

    def finish(self) -> WatchOutcome:
        """The process has exited (not yet reaped): log the verdict, the headline figures,
        the libraries mapped; return what the process did not take of its settings."""
        self._mapped.read(self._pid)  # a process too short for the loop's first read
        result = self.stop()
        phases = tuple(dict.fromkeys(self._phases_seen)) or (RUN_PHASE,)
        cores = len(self.settings.cpu_affinity or ()) or available_cores()
        verdict = judge(result.summary, phases, cores, self.thresholds)
        problems = self._libraries_not_taken()
        client = mlflow.MlflowClient()
        figures = {**curated_validity(verdict.figures), **headline_figures(result.summary, phases)}
        now = int(time.time() * 1000)
        client.log_batch(self.run_id,
                         metrics=[Metric(k, float(v), now, 0) for k, v in figures.items()],
                         tags=[RunTag(k, v) for k, v in {**verdict.tags(),
                                                         **self._mapped_tag()}.items()])
        client.log_dict(self.run_id, self._readback(problems), READBACK_ARTIFACT)
        client.log_dict(self.run_id, {"validity": verdict.figures, "monitor": result.summary,
                                      "phases": list(phases)}, SUMMARY_ARTIFACT)
        return WatchOutcome(verdict, problems, result)

    def _main_libraries(self) -> tuple[int | None, list[str]]:
        pid = self._mapped.main_process()
        return pid, sorted(self._mapped.by_pid.get(pid, ()))

    def _mapped_tag(self) -> dict[str, str]:
        _, found = self._main_libraries()
        return {MAPPED_TAG: ", ".join(os.path.basename(p) for p in found) or "none"}

    def _libraries_not_taken(self) -> tuple[str, ...]:
        """Each asked library that is not mapped into the process doing the work."""
        pid, found = self._main_libraries()
        problems = []
        for setting in ("openmp_runtime", "allocator"):
            choice = getattr(self.settings, setting)
            if choice == "default":
                continue
            wanted = os.path.realpath(library_file(setting, choice))
            if wanted not in found:
                where = (f"process {pid} ({self._mapped.commands.get(pid, '?')})" if pid
                         else "any process of the command")
                problems.append(f"{setting}={choice} was asked, but {os.path.basename(wanted)} "
                                f"is not mapped into {where}: the setting did not take "
                                "(a program that resets LD_PRELOAD, or a static build?)")
        return tuple(problems)

    def _readback(self, problems: tuple[str, ...]) -> dict[str, object]:
        pid, found = self._main_libraries()
        return {"note": OUTSIDE_NOTE, "process": {"pid": pid,
                                                  "command": self._mapped.commands.get(pid)},
                "parallel_libraries_mapped": found,
                "asked": {s: getattr(self.settings, s) for s in ("openmp_runtime", "allocator")},
                "problems": list(problems)}


def _descendants(pid: int) -> set[int]:
    """The pids of ``pid``'s descendants now (none where it is gone)."""
    with contextlib.suppress(psutil.Error):
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    return set()
