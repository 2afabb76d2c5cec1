"""The main job on the embedded default: ``make demo`` / ``mlflow-dlaas demo``.

Trains LeNet-5 on the embedded MNIST sample in PyTorch, TensorFlow and MXNet; serves each
framework's model natively and the PyTorch model's ONNX export in ONNX Runtime and
OpenVINO; runs a small PyTorch study of threads x allocator; writes the comparison report.
Every step is a real ``mlflow run`` of a project in a fresh process. Each compared
configuration (a framework's training, a runtime's serving, a cell of the study) is
measured :data:`REPLICATES` times, interleaved where the demo runs them (A B C, A B C, ...:
a burst of other load hits every configuration alike), so that each question the report
asks can be decided: 4 runs a side is the fewest with which the report's exact test can
separate two configurations. Serving screens first: after ``replicates // 2`` rounds of
every runtime, one at least :data:`CONTENDER_FACTOR` times behind the leader on both of the
report's serving questions (p99 latency at the smallest batch, throughput at the largest)
is left out of the later rounds (its runs stay in the report), which measure only the
rest. Only the first training run of each framework logs its model
(the one served).
A run that other work on the machine disturbed is measured once more (at most
:data:`REMEASURE_DISTURBED` times a demo), since the report leaves it out. A step that fails
is reported and the job goes on; the exit code says whether all succeeded.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mlflow

from mlflow_dlaas.backends import get_framework, get_runtime
from mlflow_dlaas.console_log import console
from mlflow_dlaas.errors import ConfigError, NothingToCompareError, WorkloadError
from mlflow_dlaas.launch import end_orphaned_run, start_project_run
from mlflow_dlaas.libraries.settings import installed_choices
from mlflow_dlaas.runs.schema import REASON_TAG, VALIDITY_TAG
from mlflow_dlaas.store.experiments import ensure_experiment
from mlflow_dlaas.store.tracking import configure_tracking

log = console(__name__)

DEMO_EXPERIMENT = "dlaas-demo"
REPORT_DIR = "dlaas-reports/demo"
TRAIN = {"model": "lenet5", "dataset": "mnist5k", "epochs": 2, "batch_size": 64,
         "learning_rate": 0.01, "momentum": 0.9, "target_accuracy": 0.9}
INFER = {"batch_sizes": "1,32", "scenarios": "single_stream,offline,server",
         "min_query_count": 100, "min_duration_s": 0.5}
#: Runs of each compared configuration: the fewest with which the report's exact rank test
#: can separate two of them (3 against 3 cannot give p below 0.1; 4 against 4 can: 0.029).
REPLICATES = 4
#: Runs measured once more because other work disturbed them (left out of the report), at
#: most this many a demo: a machine busy throughout would otherwise double the demo.
REMEASURE_DISTURBED = 6
#: A runtime this many times behind the serving leader on p99 latency and on throughput after
#: the screening rounds cannot be the answer to either question: the later rounds measure
#: only the others (4.7x and more separated the laggards from the leader on a 2-core
#: AVX2 EPYC; a runtime within the factor on either question stays).
CONTENDER_FACTOR = 2.0
#: the frameworks the demo trains in (each backend says which environment it runs in)
TRAIN_FRAMEWORKS = ("pytorch", "tensorflow", "mxnet")
#: (runtime, the framework whose trained model it serves, extra params)
SERVING: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("pytorch", "pytorch", {}),
    ("tensorflow", "tensorflow", {}),
    ("mxnet", "mxnet", {}),
    ("onnxruntime", "pytorch", {}),
    ("openvino", "pytorch", {}),
)
#: Threads x the allocator (jemalloc where installed), a full grid: settings whose effect on
#: LeNet-5's training time the demo's runs can tell apart (Intel's OpenMP runtime against
#: GNU's is within noise there: a study of your own measures it, examples/).
SEARCH = {"intra_op_threads": [1, 2], **installed_choices({"allocator": "jemalloc"})}
STUDY = {
    "name": "dlaas-demo-threading", "experiment": DEMO_EXPERIMENT, "frameworks": ["pytorch"],
    "entry_point": "train",
    "fixed": {**TRAIN, "epochs": 1, "log_model": False},
    "search_space": SEARCH,
    "objectives": [{"metric": "train_time", "direction": "minimize"}],
    "sampler": "grid", "n_trials": math.prod(len(choices) for choices in SEARCH.values()),
    # four runs of each grid point: the study's answer sets its fastest cell against the
    # next (4 against 4 can separate them; the libraries table compares each setting with
    # its default cell by cell, threads held fixed)
    "replicates": REPLICATES,
}


#: Every framework and runtime the demo can measure, in its order.
DEMO_SYSTEMS = tuple(dict.fromkeys([*TRAIN_FRAMEWORKS, *(runtime for runtime, _, _ in SERVING)]))


def chosen_systems(frameworks: Sequence[str] | None) -> frozenset[str]:
    """The frameworks and runtimes to measure (all by default, or for ``["all"]``); a runtime
    needs the framework whose model it serves. Raises :class:`ConfigError` naming what is
    wrong."""
    if not frameworks or list(frameworks) == ["all"]:
        return frozenset(DEMO_SYSTEMS)
    unknown = [f for f in frameworks if f not in DEMO_SYSTEMS]
    if unknown:
        raise ConfigError(f"--frameworks: unknown {', '.join(unknown)}; choose among "
                          f"{', '.join(DEMO_SYSTEMS)}")
    chosen = frozenset(frameworks)
    for runtime, source, _ in SERVING:
        if runtime in chosen and source not in chosen:
            raise ConfigError(f"--frameworks: {runtime} serves the model {source} trains; "
                              f"add {source}")
    return chosen


@dataclass
class DemoResult:
    """Run ids by role, the steps that failed, and where the report is."""

    runs: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    report: str = ""


class _Remeasures:
    """How many disturbed runs the demo may still measure once more: a burst of other work
    is worth waiting out, a machine that stays busy is not (a re-measured run disturbed
    again ends the re-measuring)."""

    def __init__(self, budget: int) -> None:
        self.left = budget

    def take(self, run_id: str) -> bool:
        """Whether to measure ``run_id``'s configuration once more: it was disturbed, and
        the budget allows."""
        if not _disturbed(run_id) or self.left <= 0:
            return False
        self.left -= 1
        log.info(f"demo: run {run_id} was disturbed by other work on this machine (the report "
                 f"leaves it out): measuring it once more ({self.left} more allowed)")
        return True

    def again_disturbed(self, run_id: str) -> None:
        """After a re-measured run: where other work disturbed it too, the machine stays
        busy, and the demo re-measures no more."""
        if self.left and _disturbed(run_id):
            self.left = 0
            log.info("demo: the re-measured run was disturbed too: this machine stays busy, "
                     "so no more runs are measured again (the report says which it left out)")


def _disturbed(run_id: str) -> bool:
    return mlflow.MlflowClient().get_run(run_id).data.tags.get(VALIDITY_TAG) == "disturbed"


def _mlflow_run(project: str, entry: str, params: Mapping[str, Any], experiment_id: str,
                env_manager: str = "local", replicate: int = 0,
                remeasures: _Remeasures | None = None) -> str:
    """One ``mlflow run`` of ``projects/<project>`` (once more where it was disturbed and
    ``remeasures`` allows); returns the run id."""
    run_id = _one_run(project, entry, params, experiment_id, env_manager, replicate)
    if remeasures is not None and remeasures.take(run_id):
        run_id = _one_run(project, entry, params, experiment_id, env_manager, replicate)
        remeasures.again_disturbed(run_id)
    return run_id


def _one_run(project: str, entry: str, params: Mapping[str, Any], experiment_id: str,
             env_manager: str, replicate: int) -> str:
    """One ``mlflow run`` of ``projects/<project>``; returns the run id."""
    shown = "".join(f" {k}={v}" for k, v in params.items() if k in ("intra_op_threads",))
    log.info(f"demo: {project} {entry}{shown}, replicate {replicate + 1} ...")
    submitted = start_project_run(project, entry, params, experiment_id=experiment_id,
                                  env_manager=env_manager)
    client = mlflow.MlflowClient()
    succeeded = submitted.wait()
    succeeded = not end_orphaned_run(client, submitted) and succeeded
    if not succeeded:
        reason = client.get_run(submitted.run_id).data.tags.get(REASON_TAG, "see the run's log")
        raise WorkloadError(f"{project} {entry} run {submitted.run_id} failed: {reason}")
    return submitted.run_id


def run_demo(replicates: int = REPLICATES, frameworks: Sequence[str] | None = None
             ) -> DemoResult:
    """Train, serve, tune, compare; failures are collected, not fatal to the other steps.
    Each training configuration and study cell runs ``replicates`` times, interleaved, and
    serving as many rounds, those after the first half only of the runtimes still in the
    running;
    ``frameworks`` limits the frameworks and runtimes measured (the study is PyTorch's)."""
    from mlflow_dlaas.tuning.spec import parse_spec
    from mlflow_dlaas.tuning.study import run_study

    if replicates < 1:
        raise ConfigError(f"replicates must be at least 1, got {replicates}")
    chosen = chosen_systems(frameworks)
    target = configure_tracking()
    experiment_id = ensure_experiment(DEMO_EXPERIMENT)
    result = DemoResult()
    remeasures = _Remeasures(REMEASURE_DISTURBED)

    def step(role: str, action: Any) -> Any:
        """Run one step; any failure (a run, an environment, the store) is noted, not fatal."""
        try:
            return action()
        except Exception as e:  # the job reports every failure at its end
            result.failures.append(f"{role}: {type(e).__name__}: {e}")
            log.info(f"demo: {role} failed, going on: {e}")
            return None

    for replicate in range(replicates):  # repeat-major: A B C, A B C, ...
        for framework in TRAIN_FRAMEWORKS:
            if framework not in chosen:
                continue
            env_manager = get_framework(framework).env_manager
            role = f"train/{framework}"
            # the model of the first run that succeeds is the one served: only it is logged
            params = {**TRAIN, "seed": replicate, "log_model": role not in result.runs}
            run_id = step(role, lambda f=framework, m=env_manager, p=params, i=replicate:
                          _mlflow_run(f, "train", p, experiment_id, m, i, remeasures))
            if run_id and role not in result.runs:  # its model is the one served
                result.runs[role] = run_id
    served: dict[str, list[str]] = {}  # role -> its serving runs
    serving = {_serving_role(runtime, extra): (runtime, source, extra)
               for runtime, source, extra in SERVING
               if runtime in chosen and f"train/{source}" in result.runs}
    for replicate in range(replicates):
        if replicate and replicate == replicates // 2:
            serving = _contenders(serving, served)
        for role, (runtime, source, extra) in serving.items():
            params = {**INFER, **extra, "model_uri": f"runs:/{result.runs[f'train/{source}']}",
                      "seed": replicate}
            run_id = step(role, lambda r=runtime, p=params, i=replicate: _mlflow_run(
                r, "infer", p, experiment_id, get_runtime(r).env_manager, i,
                remeasures))
            if run_id:
                served.setdefault(role, []).append(run_id)
                result.runs.setdefault(role, run_id)
    summary = None
    if "pytorch" in chosen:
        log.info("demo: threading study ...")
        launcher = os.environ.pop("MLFLOW_RUN_ID", None)  # under `mlflow run .`: not the parent
        try:
            summary = step("threading study", lambda: run_study(
                parse_spec({**STUDY, "replicates": replicates})))
        finally:
            if launcher:
                os.environ["MLFLOW_RUN_ID"] = launcher
    if summary is not None and summary.failed:
        result.failures.append(f"threading study: {summary.failed} failed trials")
    compared = step("report", _compare)
    if compared is not None:
        written, _ = compared
        result.report = str(written.html.resolve())
        if written.markdown in written.files:
            _print_answer(written.markdown.read_text())
        log.info(f"demo: report: {result.report}")
        result.failures += [f"report: {failure}" for failure in written.failures]
    log.info(f"demo: runs are in experiment {DEMO_EXPERIMENT!r}; to see them: "
             f"{target.ui_command()}")
    log.info(f"demo: an answer still open? mlflow-dlaas decide --experiment {DEMO_EXPERIMENT} "
             "--budget 10m measures more of only the configurations behind it "
             "(docs/report.md)")
    log.info("demo: do the papers' findings hold on this machine? mlflow-dlaas reproduce "
             "(about 20 minutes on 2 cores; docs/reproduce.md)")
    if result.failures:
        raise WorkloadError("the demo finished with failed steps (in the report as failed "
                            "runs): " + "; ".join(result.failures))
    return result


def _serving_role(runtime: str, extra: Mapping[str, Any]) -> str:
    return f"infer/{runtime}" + "".join(f"/{k}={v}" for k, v in extra.items())


def _contenders(serving: dict[str, Any], served: Mapping[str, list[str]]) -> dict[str, Any]:
    """The serving configurations (by role) still in the running: within
    :data:`CONTENDER_FACTOR` of the leader on p99 latency at the smallest batch or on
    throughput at the largest, by the geometric mean of their valid runs so far (of their
    disturbed ones where none is valid: steal or a burst of other work cannot hide a 2x gap;
    one with no figures stays)."""
    batches = sorted(int(b) for b in INFER["batch_sizes"].split(","))
    questions = {f"single_stream/batch_{batches[0]}/latency_p99_ms": min,
                 f"offline/batch_{batches[-1]}/throughput_samples_per_second": max}
    client = mlflow.MlflowClient()
    figures: dict[str, dict[str, float]] = {}
    for role, run_ids in served.items():
        runs = [client.get_run(i).data for i in run_ids]
        valid = [r.metrics for r in runs if r.tags.get(VALIDITY_TAG) != "disturbed"]
        screened = valid or [r.metrics for r in runs]  # a 2x gap outlasts a disturbance
        if screened and all(key in m for m in screened for key in questions):
            figures[role] = {key: math.exp(sum(math.log(m[key]) for m in screened)
                                           / len(screened)) for key in questions}
    leaders = {key: best(f[key] for f in figures.values()) for key, best in questions.items()
               if figures}
    behind = {role for role, f in figures.items()
              if all(max(f[key], leaders[key]) >= CONTENDER_FACTOR * min(f[key], leaders[key])
                     for key in questions)}
    if behind:
        kept = ", ".join(r.removeprefix("infer/") for r in serving if r not in behind)
        left = ", ".join(r.removeprefix("infer/") for r in sorted(behind))
        log.info(f"demo: the later serving rounds measure only {kept}: {left} at least "
                 f"{CONTENDER_FACTOR:g}x behind the leader on p99 latency at batch "
                 f"{batches[0]} and on throughput at batch {batches[-1]} (their runs stay "
                 "in the report)")
    return {role: s for role, s in serving.items() if role not in behind}


def _compare() -> Any:
    """The demo's report; where other work on this machine disturbed so many runs that the
    valid ones compare nothing (none kept, or one configuration), one that compares them all,
    saying so (a reader of the demo still sees its answer)."""
    from mlflow_dlaas.report.command import compare
    from mlflow_dlaas.report.recommend import DECIDED_PREFIX

    try:
        compared = compare(experiment=DEMO_EXPERIMENT, study=None, output=REPORT_DIR)
    except NothingToCompareError as e:
        log.info(f"demo: {e}; the demo's report compares them, marked disturbed")
    else:
        written, _ = compared
        if written.markdown not in written.files or \
                DECIDED_PREFIX in written.markdown.read_text():
            return compared
        log.info("demo: nothing to compare: all but a few runs were disturbed by other work on "
                 "this machine; the demo's report compares them, marked disturbed")
    return compare(experiment=DEMO_EXPERIMENT, study=None, output=REPORT_DIR,
                   include_disturbed=True)


def _print_answer(markdown: str) -> None:
    """The report's recommendations and tables, as the Markdown summary has them."""
    keep = markdown.split("## Plots")[0]
    print("\n" + keep.strip() + "\n")


__all__ = ["run_demo"]
