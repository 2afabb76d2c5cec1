"""The monitor: one sampler thread, phases, and an MLflow sink."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from types import TracebackType

from mlflow_dlaas.errors import ConfigError, SourceUnavailable
from mlflow_dlaas.monitor.base import Sampler
from mlflow_dlaas.monitor.harness import HarnessSampler
from mlflow_dlaas.monitor.nvml import NvmlSampler
from mlflow_dlaas.monitor.process import ProcessTreeSampler
from mlflow_dlaas.monitor.rapl import RaplSampler
from mlflow_dlaas.monitor.sink import MlflowSink
from mlflow_dlaas.monitor.summary import summarize
from mlflow_dlaas.monitor.system import SystemSampler
from mlflow_dlaas.monitor.timeline import MonitorResult, PhaseWindow, Sample, Timeline

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.2
MIN_INTERVAL_S = 0.01
#: the longest interval between samples: a run shorter than it would show no timeline
MAX_INTERVAL_S = 3600.0
DEFAULT_FLUSH_INTERVAL_S = 5.0
#: How long stopping waits for the sampling thread: longer than a silent store's one bounded
#: wait (its push then goes to the run's journal), never for ever.
JOIN_WITHIN_S = 60.0


def validate_interval(interval_s: float) -> float:
    """Return ``interval_s`` if usable, else raise :class:`ConfigError` saying what is."""
    if not interval_s > 0:
        raise ConfigError(f"monitor interval must be > 0 seconds, got {interval_s}; try 0.1")
    if interval_s < MIN_INTERVAL_S:
        raise ConfigError(
            f"monitor interval {interval_s} s is below the supported {MIN_INTERVAL_S} s; "
            "the monitor works down to 0.05 s"
        )
    if not interval_s <= MAX_INTERVAL_S:  # inf and NaN too
        raise ConfigError(f"monitor interval {interval_s} s is above the supported "
                          f"{MAX_INTERVAL_S:g} s; try 0.2")
    return interval_s


def default_samplers(pid: int) -> list[Sampler]:
    """Process tree of ``pid``, the system, NVIDIA GPUs and RAPL; this process's own CPU
    when ``pid`` is another process's (whose counters then run from its start: a child we
    started, which may have begun its work before the monitor)."""
    other = pid != os.getpid()
    tree = ProcessTreeSampler(pid, since_start=other)
    own = [HarnessSampler()] if other else []
    return [tree, SystemSampler(), NvmlSampler(tree.pids), RaplSampler(), *own]


def yield_on_wakeup() -> None:
    """Make the calling thread never preempt a running one when it wakes (Linux
    ``SCHED_BATCH``: the same fair share of the CPU, no wake-up preemption). A sample that
    preempted one of a runtime's barrier-synchronised threads on a fully used machine held
    the whole inference for a scheduler slice: at a 0.2 s interval, OpenVINO's server p99 on
    2 cores crossed a 5 ms bound at 1,300 queries/s instead of 2,700 (docs/monitor.md)."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux: nothing to do
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


class ResourceMonitor:
    """Samples a process tree (default: this process) and the machine every ``interval_s``.

    Use as a context manager inside an MLflow run, or call :meth:`start` / :meth:`stop`.
    Phases (``with monitor.phase("train"):``) take a sample at each boundary so that
    counters (CPU seconds, energy) are exact per phase. A probe that raises is warned
    about once and counted; it never stops the workload.
    """

    def __init__(
        self,
        *,
        run_id: str | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        pid: int | None = None,
        samplers: Sequence[Sampler] | None = None,
        log_to_mlflow: bool = True,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
    ) -> None:
        self.interval_s = validate_interval(interval_s)
        self.pid = os.getpid() if pid is None else pid
        self._samplers = list(samplers) if samplers is not None else default_samplers(self.pid)
        self._run_id = run_id
        self._log_to_mlflow = log_to_mlflow
        self._flush_interval_s = flush_interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._samples: list[Sample] = []
        self._phases: list[PhaseWindow] = []
        self._open_phases: dict[str, float] = {}
        self._unavailable: dict[str, str] = {}
        self._probe_errors = 0
        self._failed_probes: set[str] = set()
        self._push_errors: set[str] = set()
        self._thread_cpu_s = 0.0  # the sampler thread's own CPU, all of it
        self._outside_cpu_s = 0.0  # samples taken by other threads (phase marks, the ends)
        self._sink: MlflowSink | None = None
        self._flushed = 0
        self.result: MonitorResult | None = None

    # lifecycle -----------------------------------------------------------------------------
    def start(self) -> ResourceMonitor:
        if self._log_to_mlflow:
            self._sink = MlflowSink(self._resolve_run_id())
        live = []
        for sampler in self._samplers:
            try:
                sampler.open()
                live.append(sampler)
            except SourceUnavailable as e:
                self._unavailable[sampler.name] = str(e)
                # expected (no GPU, no RAPL): the run's tags say it; the console need not
                log.debug("monitor source %s unavailable: %s", sampler.name, e)
        self._samplers = live
        self._t0 = time.perf_counter()
        self._wall0 = time.time()
        self.sample_now()
        self._thread = threading.Thread(target=self._loop, name="dlaas-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> MonitorResult:
        """Take a last sample, stop the thread, log everything; idempotent."""
        if self.result is not None:
            return self.result
        self._stop.set()
        if self._thread is not None:  # a push held by a silent store ends within its bound
            self._thread.join(timeout=JOIN_WITHIN_S)
        self.sample_now()
        for sampler in self._samplers:
            with contextlib.suppress(Exception):
                sampler.close()
        for sampler in self._samplers:
            for key, note in getattr(sampler, "notes", {}).items():
                self._unavailable[key] = note
            self._probe_errors += getattr(sampler, "probe_errors", 0)
        timeline = Timeline(self._wall0, tuple(self._samples), tuple(self._phases))
        self.result = MonitorResult(
            timeline=timeline,
            summary=summarize(timeline),
            unavailable=dict(self._unavailable),
            probe_errors=self._probe_errors,
            monitor_cpu_seconds=self._thread_cpu_s + self._outside_cpu_s,
            wall_seconds=time.perf_counter() - self._t0,
        )
        if self._sink is not None:
            self._push_pending()
            self._sink.finish(self.result, self.interval_s)
        return self.result

    def __enter__(self) -> ResourceMonitor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # phases --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Mark a window; samples are taken at its start and end."""
        self.begin_phase(name)
        try:
            yield
        finally:
            self.end_phase(name)

    def begin_phase(self, name: str, at_wall_s: float | None = None) -> None:
        """Open window ``name`` now (for phases reported by another process).

        The tree's kernel RSS high-water mark restarts here, so the phase's peak is exact
        even between samples (``proc_hwm_rss_bytes`` is therefore the peak since the last
        phase began). ``at_wall_s``: when the reporting process began it (``time.time()``);
        a phase begun before this monitor started opens there, before the first sample.
        """
        if not name or "/" in name:
            raise ConfigError(f"phase name must be non-empty and without '/', got {name!r}")
        before = self._before_start(at_wall_s)
        if before is not None:  # the mark still holds that phase's peak: keep it
            self._open_phases[name] = before
            return
        with self._lock:
            for sampler in self._samplers:
                if isinstance(sampler, ProcessTreeSampler):
                    sampler.reset_high_water()
        self._open_phases[name] = self.sample_now()

    def end_phase(self, name: str, at_wall_s: float | None = None) -> None:
        """Close window ``name``, opened by :meth:`begin_phase` (``at_wall_s`` as there)."""
        start = self._open_phases.pop(name)
        end = self._before_start(at_wall_s)
        self._phases.append(PhaseWindow(name, start, self.sample_now() if end is None else end))

    def _before_start(self, at_wall_s: float | None) -> float | None:
        """``at_wall_s`` on the monitor clock where it lies before the monitor started (a
        negative time), else None."""
        if at_wall_s is None or at_wall_s >= self._wall0:
            return None
        return at_wall_s - self._wall0

    # sampling ------------------------------------------------------------------------------
    def sample_now(self) -> float:
        """Read every source now; returns the sample's time on the monitor clock."""
        cpu0 = time.thread_time()
        try:
            return self._sample()
        finally:
            if threading.current_thread() is not self._thread:  # the loop counts its own
                self._outside_cpu_s += time.thread_time() - cpu0

    def _sample(self) -> float:
        with self._lock:
            values: dict[str, float] = {}
            for sampler in self._samplers:
                try:
                    values.update(sampler.collect())
                except Exception as e:  # a failing probe never kills the workload
                    self._probe_errors += 1
                    if sampler.name not in self._failed_probes:
                        self._failed_probes.add(sampler.name)
                        log.warning("monitor source %s failed: %s (counted from now on)",
                                    sampler.name, e)
            t = time.perf_counter() - self._t0
            self._samples.append(Sample(t, values))
            return t

    def _loop(self) -> None:
        yield_on_wakeup()
        cpu0 = time.thread_time()
        next_t = time.perf_counter() + self.interval_s
        last_flush = time.perf_counter()
        while not self._stop.wait(max(0.0, next_t - time.perf_counter())):
            self.sample_now()
            now = time.perf_counter()
            next_t = max(next_t + self.interval_s, now + self.interval_s / 2)
            if self._sink is not None and now - last_flush >= self._flush_interval_s:
                try:
                    self._push_pending()
                except Exception as e:  # the tracking server may hiccup; retry next time
                    said = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
                    if said not in self._push_errors:  # once per cause, in one line
                        self._push_errors.add(said)
                        log.warning("monitor could not log to MLflow yet (it retries): %s",
                                    said)
                last_flush = now
            self._thread_cpu_s = time.thread_time() - cpu0

    def _push_pending(self) -> None:
        with self._lock:
            new = self._samples[self._flushed :]
            start = self._flushed
            self._flushed = len(self._samples)
        for step, sample in enumerate(new, start=start):
            self._sink.add(sample, step, self._wall0)
        self._sink.flush()

    def _resolve_run_id(self) -> str:
        if self._run_id:
            return self._run_id
        import mlflow

        active = mlflow.active_run()
        if active is None:
            raise ConfigError(
                "ResourceMonitor needs an MLflow run: call it inside mlflow.start_run(), "
                "pass run_id=..., or pass log_to_mlflow=False"
            )
        return active.info.run_id
