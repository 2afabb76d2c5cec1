"""Real measured runs for the report tests: training replicates, inference at two thread counts."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pytest

from mlflow_dlaas.runs.schema import VALIDITY_TAG
from mlflow_dlaas.runs.validity import VALID
from mlflow_dlaas.store.store_uri import ACTIVE_ENV, TRACKING_ENV

ROOT = Path(__file__).resolve().parents[2]
STUDY = "report-fixture-study"
TRAIN = {"model": "mlp", "dataset": "digits", "epochs": 3, "batch_size": 32,
         "learning_rate": 0.05, "target_accuracy": 0.5}
INFER = {"batch_sizes": "1,4", "scenarios": "single_stream,offline", "min_query_count": 30,
         "min_duration_s": 0.2}


@dataclass(frozen=True)
class Measured:
    """The experiment and the run ids the report tests compare."""

    experiment: str
    uri: str
    root: Path
    train: dict[str, list[str]]  # framework -> run ids
    infer: dict[str, list[str]]  # runtime -> run ids
    failed: str

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_EXPERIMENT")}
        return {**env, TRACKING_ENV: self.uri, ACTIVE_ENV: "0",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}


def _workload(module: str, params: dict[str, object], env: dict[str, str], cwd: Path) -> str:
    cmd = [sys.executable, "-m", f"mlflow_dlaas.workloads.{module}"]
    for key, value in params.items():
        cmd += [f"--{key}", str(value)]
    done = subprocess.run(cmd, env={**env, "PYTHONPATH": str(ROOT)}, cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return re.search(r"^run ([0-9a-f]{32}):", done.stderr, re.MULTILINE).group(1)


@pytest.fixture(scope="session")
def measured(tracking_root: Path) -> Iterator[Measured]:
    """Six real runs in one experiment (about a minute), and one failed run."""
    uri = f"sqlite:///{tracking_root / 'mlflow.db'}"
    name = f"report-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update({TRACKING_ENV: uri, "MLFLOW_EXPERIMENT_NAME": name, ACTIVE_ENV: "1"})
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient()
    experiment_id = client.create_experiment(name)
    train = {"pytorch": [_workload("train", {**TRAIN, "framework": "pytorch", "seed": s}, env,
                                   tracking_root) for s in (1, 2)],
             "tensorflow": [_workload("train", {**TRAIN, "framework": "tensorflow", "seed": 1},
                                      env, tracking_root)]}
    parent = client.create_run(experiment_id, run_name=STUDY, tags={
        "dlaas.role": "study", "dlaas.study": STUDY, "dlaas.entry": "study"})
    client.set_terminated(parent.info.run_id, "FINISHED")
    for run_id in train["pytorch"]:  # as a study driver tags its trials
        client.set_tag(run_id, "dlaas.study", STUDY)
        client.set_tag(run_id, "dlaas.role", "trial")
    served = {"model_uri": f"runs:/{train['pytorch'][0]}"}
    infer = {"onnxruntime": [_workload("infer", {**INFER, **served, "runtime": "onnxruntime",
                                                 "intra_op_threads": t}, env, tracking_root)
                             for t in (1, 2)],
             "pytorch": [_workload("infer", {**INFER, **served, "runtime": "pytorch",
                                             "intra_op_threads": 1}, env, tracking_root)]}
    for run_id in (r for runs in (*train.values(), *infer.values()) for r in runs):
        # whether a real run here was disturbed depends on what else the machine ran: the
        # report tests fix the verdict (tests/report/test_screening.py covers the others)
        client.set_tag(run_id, VALIDITY_TAG, VALID)
    failed = client.create_run(experiment_id, run_name="diverged",
                               tags={"dlaas.entry": "train", "dlaas.framework": "pytorch",
                                     "dlaas.failure_reason": "training diverged"})
    client.set_terminated(failed.info.run_id, "FAILED")
    yield Measured(name, uri, tracking_root, train, infer, failed.info.run_id)


@pytest.fixture(scope="session")
def report_dir(measured: Measured, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mlflow-dlaas compare`` of the measured experiment, run once: its output directory."""
    out = tmp_path_factory.mktemp("report")
    path = shutil.which("mlflow-dlaas")
    if path is None:
        pytest.skip("the mlflow-dlaas console script is not on PATH; run the tests with make test")
    done = subprocess.run([path, "compare", "--experiment", measured.experiment,
                           "--output", str(out)], env=measured.env(), cwd=measured.root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"report: {out / 'report.html'}" in done.stdout
    return out
