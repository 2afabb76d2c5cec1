"""Each library setting in force in a real training run of PyTorch, TensorFlow and MXNet, read
back from the measured worker; a setting that cannot act fails the run saying why."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.libraries.readback import ARTIFACT_DIR, ARTIFACT_FILE
from mlflow_dlaas.libraries.settings import library_file
from mlflow_dlaas.runs.schema import MAPPED_TAG, REASON_TAG
from tests.conftest import artifact_text, runs_of
from tests.workloads.projects import mlflow_run

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TINY = {"model": "lenet5", "dataset": "mnist5k", "epochs": 1, "max_steps": 10,
        "batch_size": 64, "warmup_steps": 1, "log_model": "false", "monitor_interval": 0.2}


def _need(module: str, *libraries: tuple[str, str]) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed here")
    for setting, choice in libraries:
        try:
            library_file(setting, choice)
        except ConfigError as e:
            pytest.skip(str(e))


def _train(experiment: str, framework: str, **settings: str) -> mlflow.entities.Run:
    """One tiny training run through the entry point, as a project starts it."""
    args = [part for k, v in {**TINY, **settings}.items() for part in (f"--{k}", str(v))]
    env = {**os.environ, "MLFLOW_EXPERIMENT_NAME": experiment, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "mlflow_dlaas.workloads.train", "--framework",
                    framework, *args], env=env, capture_output=True, text=True, timeout=600)
    (run,) = runs_of(experiment)
    return run


def _readback(run: mlflow.entities.Run) -> dict:
    return json.loads(artifact_text(run.info.run_id, f"{ARTIFACT_DIR}/{ARTIFACT_FILE}"))


def _finished(run: mlflow.entities.Run) -> dict[str, str]:
    assert run.info.status == "FINISHED", run.data.tags.get(REASON_TAG)
    return run.data.params


def test_pytorch_runs_on_intel_openmp_and_tcmalloc_with_intel_policies(tracking: str) -> None:
    _need("torch", ("openmp_runtime", "intel"), ("allocator", "tcmalloc"))
    run = _train(tracking, "pytorch", openmp_runtime="intel", allocator="tcmalloc",
                 onednn="off", kmp_blocktime="0", omp_wait_policy="passive")
    params = _finished(run)
    assert params["in_force_openmp_runtime"] == "intel (libiomp5.so)"
    assert params["in_force_allocator"].startswith("tcmalloc (libtcmalloc_minimal.so.4")
    assert params["in_force_onednn"] == "off"
    assert params["in_force_kmp_blocktime"] == "0"
    found = _readback(run)
    # PyTorch's own libgomp stays mapped, but Intel's runtime serves the calls
    assert any("torch/lib/libgomp" in p for p in found["mapped"]), found["mapped"]
    assert all(f.endswith("libiomp5.so") for f in found["openmp_served_by"].values())
    assert found["not_in_force"] == []
    assert "libiomp5.so" in run.data.tags[MAPPED_TAG]


def test_pytorch_gnu_openmp_is_the_systems_libgomp_not_its_own(tracking: str) -> None:
    _need("torch", ("openmp_runtime", "gnu"))
    run = _train(tracking, "pytorch", openmp_runtime="gnu", omp_proc_bind="false")
    params = _finished(run)
    assert params["in_force_openmp_runtime"] == "gnu (libgomp.so.1.0.0)"
    assert params["in_force_omp_proc_bind"] == "false"
    served = set(_readback(run)["openmp_served_by"].values())
    assert served == {os.path.realpath(library_file("openmp_runtime", "gnu"))}


def test_an_intel_only_policy_on_pytorchs_own_openmp_fails_the_run_saying_why(
        tracking: str) -> None:
    _need("torch")
    run = _train(tracking, "pytorch", kmp_blocktime="0")
    assert run.info.status == "FAILED"
    reason = run.data.tags[REASON_TAG]
    assert "kmp_blocktime is read by Intel's OpenMP only" in reason
    assert "libgomp.so.1: set openmp_runtime=intel" in reason
    assert run.data.params["in_force_openmp_runtime"] == "gnu (libgomp.so.1)"  # logged anyway


def test_tensorflow_runs_with_jemalloc_and_onednn_off(tracking: str) -> None:
    _need("tensorflow", ("allocator", "jemalloc"))
    run = _train(tracking, "tensorflow", allocator="jemalloc", onednn="off")
    params = _finished(run)
    assert params["in_force_allocator"] == "jemalloc (libjemalloc.so.2)"
    assert params["in_force_onednn"] == "off"  # TensorFlow's own IsMklEnabled()
    assert _readback(run)["environment"]["TF_ENABLE_ONEDNN_OPTS"] == "0"


def test_tensorflow_refuses_an_openmp_runtime_it_does_not_use(tracking: str) -> None:
    """Refused before the worker starts: under `mlflow run` the run ends FAILED saying why;
    run directly, the entry refuses it with exit 2 and makes no run."""
    _need("tensorflow")
    out = mlflow_run("tensorflow", tracking, {**TINY, "openmp_runtime": "intel"})
    assert out.returncode != 0 and "TensorFlow uses no OpenMP" in out.stderr
    (run,) = runs_of(tracking)
    assert run.info.status == "FAILED"
    assert "TensorFlow uses no OpenMP" in run.data.tags[REASON_TAG]
    args = [part for k, v in {**TINY, "openmp_runtime": "intel"}.items()
            for part in (f"--{k}", str(v))]
    direct = subprocess.run([sys.executable, "-m", "mlflow_dlaas.workloads.train",
                             "--framework", "tensorflow", *args], capture_output=True,
                            text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": str(ROOT),
                                 "MLFLOW_EXPERIMENT_NAME": tracking})
    assert direct.returncode == 2 and "TensorFlow uses no OpenMP" in direct.stderr
    assert len(runs_of(tracking)) == 1


def test_mxnet_runs_on_intel_openmp_and_jemalloc_in_its_own_virtualenv(tracking: str) -> None:
    if shutil.which("pyenv") is None:
        pytest.skip("MLflow's virtualenv manager needs pyenv for the exact Python 3.11.7")
    _need("mlflow", ("allocator", "jemalloc"))
    out = mlflow_run("mxnet", tracking, {**TINY, "openmp_runtime": "intel",
                                         "allocator": "jemalloc", "onednn": "off",
                                         "kmp_blocktime": "0", "omp_proc_bind": "close"},
                     env_manager="virtualenv", timeout=1500)
    (run,) = runs_of(tracking)
    params = _finished(run)
    assert out.returncode == 0, out.stderr[-3000:]
    assert params["in_force_openmp_runtime"] == "intel (libiomp5.so)"
    assert params["in_force_allocator"] == "jemalloc (libjemalloc.so.2)"
    assert params["in_force_onednn"] == "off"
    assert params["in_force_kmp_blocktime"] == "0"
    assert params["in_force_omp_proc_bind"] == "close"
    found = _readback(run)
    # MXNet links the system's libgomp, which stays mapped; libiomp5 serves its GOMP calls
    assert any("libgomp" in p for p in found["mapped"]), found["mapped"]
    assert found["openmp_served_by"]["GOMP_parallel_start"].endswith("libiomp5.so")
