"""MLPerf's own LoadGen (``mlperf_loadgen``, the ``mlcommons-loadgen`` wheel) runs every test.

LoadGen issues the queries (when, how many, which samples), decides when a test may stop
(its minimum query count AND its minimum duration) and judges the test VALID or INVALID,
its early-stopping rule included. The system under test (SUT) is ours: it serves each
query with the runtime's predictor and clocks each query itself, since LoadGen's Python
binding hands back no per-query latency; the percentiles and the CDF rest on those raw
samples. LoadGen's summary and detail logs are kept as the run's artifacts.

LoadGen is one per process: one test at a time (co-located ensembles, which need several
streams at once in one process, keep a hand-written loop: :mod:`scenarios`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg

from mlflow_dlaas.inference.latency import LoadgenVerdict

SUMMARY_LOG, DETAIL_LOG = "mlperf_log_summary.txt", "mlperf_log_detail.txt"
#: What LoadGen writes beside its summary and detail logs that a performance run does not use.
UNUSED_LOGS = ("mlperf_log_trace.json", "mlperf_log_accuracy.json")
SCENARIOS = {"single_stream": lg.TestScenario.SingleStream,
             "multi_stream": lg.TestScenario.MultiStream,
             "offline": lg.TestScenario.Offline,
             "server": lg.TestScenario.Server}


@dataclass(frozen=True)
class TestSpec:
    """What one LoadGen test is asked for (times in seconds, rates in queries/s)."""

    scenario: str
    min_queries: int
    min_duration_s: float
    expected_latency_s: float = 0.001  # single- and multi-stream: how many queries to plan
    expected_qps: float = 1000.0  # offline: how many samples to issue in its one query
    target_qps: float = 0.0  # server: the Poisson arrival rate
    target_latency_s: float = 0.0  # server: the latency bound (0: none)
    samples_per_query: int = 1  # multi-stream
    seed: int = 0

    def settings(self) -> Any:
        """LoadGen's ``TestSettings`` for this test, performance mode."""
        s = lg.TestSettings()
        s.scenario = SCENARIOS[self.scenario]
        s.mode = lg.TestMode.PerformanceOnly
        s.min_query_count = self.min_queries
        s.min_duration_ms = int(round(self.min_duration_s * 1000))
        s.single_stream_expected_latency_ns = max(1, int(self.expected_latency_s * 1e9))
        s.multi_stream_expected_latency_ns = max(1, int(self.expected_latency_s * 1e9))
        s.multi_stream_samples_per_query = self.samples_per_query
        s.offline_expected_qps = max(self.expected_qps, 1e-3)
        if self.scenario == "server":
            s.server_target_qps = self.target_qps
            # no bound: a day, so that only the counts and early stopping judge the test
            s.server_target_latency_ns = int((self.target_latency_s or 86400.0) * 1e9)
        s.qsl_rng_seed = s.sample_index_rng_seed = s.schedule_rng_seed = self.seed
        return s


#: ``issue(samples)``: serve LoadGen's query samples (each has ``.id`` and ``.index``) and
#: call :func:`complete` for each, in this thread or another.
Issue = Callable[[list[Any]], None]


def complete(samples: Sequence[Any]) -> None:
    """Tell LoadGen that ``samples`` are served (a performance run returns no data)."""
    lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0) for s in samples])


def run_test(spec: TestSpec, issue: Issue, sample_count: int, log_dir: Path,
             flush: Callable[[], None] = lambda: None) -> LoadgenVerdict:
    """Run one LoadGen test over a library of ``sample_count`` samples; its logs go to
    ``log_dir``. An error raised while serving completes every query at once (so LoadGen
    ends the test) and is raised here afterwards."""
    errors: list[BaseException] = []

    def guarded(samples: list[Any]) -> None:
        if not errors:
            try:
                issue(samples)
                return
            except BaseException as e:  # noqa: BLE001 - raised again once LoadGen stops
                errors.append(e)
        complete(samples)

    log_dir.mkdir(parents=True, exist_ok=True)
    logs = lg.LogSettings()
    logs.log_output.outdir = str(log_dir)
    logs.log_output.copy_summary_to_stdout = False
    logs.enable_trace = False
    sut = lg.ConstructSUT(guarded, flush)
    qsl = lg.ConstructQSL(sample_count, sample_count, _nothing, _nothing)
    try:
        lg.StartTestWithLogSettings(sut, qsl, spec.settings(), logs)
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    for name in UNUSED_LOGS:
        (log_dir / name).unlink(missing_ok=True)
    if errors:
        raise errors[0]
    return LoadgenVerdict.from_detail(read_detail(log_dir / DETAIL_LOG))


def read_detail(path: Path) -> dict[str, Any]:
    """LoadGen's detail log as ``key -> value`` (its ``:::MLLOG {json}`` records)."""
    found: dict[str, Any] = {}
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(":::MLLOG "):
            try:
                record = json.loads(line[len(":::MLLOG "):])
            except json.JSONDecodeError:
                continue
            found[record.get("key", "")] = record.get("value")
    return found


def _nothing(_: list[int]) -> None:
    """Load / unload samples: the library is in memory already."""
