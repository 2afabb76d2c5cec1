"""Every inference runtime keeps one contract (mlflow_dlaas.testing.runtime_contract), and a
sixth, a plug-in registered through the entry-point group alone, keeps it too; a seventh with
its own file kind serves a user's file of that kind."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mlflow_dlaas.backends import (
    RUNTIME_GROUP,
    RUNTIMES,
    available_runtimes,
    get_runtime,
)
from mlflow_dlaas.backends.formats import FORMAT_GROUP
from mlflow_dlaas.runs.schema import RUNTIME_TAG
from mlflow_dlaas.testing.runtime_contract import check_runtime
from tests.conftest import ROOT, runs_of

PLUGIN = Path(__file__).parent / "plugin" / "dlaas_torchscript_runtime.py"
PLUGIN_NAME = "torchscript"
LINEAR_PLUGIN = Path(__file__).parent / "plugin" / "dlaas_linear_runtime.py"


@pytest.mark.parametrize("name", list(RUNTIMES))
def test_every_built_in_runtime_keeps_the_contract(name: str, tmp_path: Path) -> None:
    runtime = get_runtime(name)
    if importlib.util.find_spec(runtime.module) is None:
        pytest.skip(f"{runtime.module} is not installed in this environment (extra: "
                    f"{runtime.extra}); projects/{name} tests it in its own environment")
    check_runtime(type(runtime), tmp_path)


def install_plugin(site: Path, source: Path, entry_points: str) -> None:
    """A plug-in as pip would leave it in ``site``: its module, and a dist-info whose entry
    points are ``entry_points``."""
    site.mkdir(exist_ok=True)
    shutil.copy(source, site / source.name)
    info = site / f"{source.stem}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {source.stem}\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The TorchScript plug-in installed in a folder on the path (returned)."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the plug-in traces a PyTorch model (extra: torch)")
    site = tmp_path / "site"
    install_plugin(site, PLUGIN, f"[{RUNTIME_GROUP}]\n"
                   f"{PLUGIN_NAME} = dlaas_torchscript_runtime:TorchScriptRuntime\n")
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("dlaas_torchscript_runtime", None)


def test_a_plugin_runtime_is_one_package_and_one_entry_point(installed_plugin: Path,
                                                             tmp_path: Path) -> None:
    assert PLUGIN_NAME in available_runtimes()
    runtime = get_runtime(PLUGIN_NAME)
    assert type(runtime).__name__ == "TorchScriptRuntime"
    check_runtime(type(runtime), tmp_path / "contract")


@pytest.mark.slow
def test_a_plugin_runtime_serves_a_measured_run(installed_plugin: Path, tracking: str) -> None:
    """The plug-in, with nothing of it in this package, runs the infer entry point end to
    end: a FINISHED run with its scenario figures and output check."""
    env = {**os.environ, "MLFLOW_EXPERIMENT_NAME": tracking,
           "PYTHONPATH": os.pathsep.join([str(installed_plugin), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "mlflow_dlaas.workloads.infer", "--runtime",
                           PLUGIN_NAME, "--batch_sizes", "1,4", "--scenarios",
                           "single_stream,offline", "--min_query_count", "50",
                           "--min_duration_s", "0.2"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = runs_of(tracking)
    assert run.info.status == "FINISHED"
    assert run.data.tags[RUNTIME_TAG] == PLUGIN_NAME
    assert run.data.metrics["single_stream/batch_1/latency_p50_ms"] > 0
    assert run.data.metrics["equivalence/max_abs_error"] <= 1e-3


@pytest.mark.slow
def test_a_plugin_with_its_own_file_kind_serves_a_users_file(tmp_path: Path,
                                                             tracking: str) -> None:
    """A runtime and the file kind it reads, registered through their two entry points alone,
    serve a user's file of that kind end to end; the built-in runtimes refuse the kind and
    name the one that reads it."""
    site = tmp_path / "site"
    install_plugin(site, LINEAR_PLUGIN, f"[{RUNTIME_GROUP}]\n"
                   "linear = dlaas_linear_runtime:LinearRuntime\n"
                   f"[{FORMAT_GROUP}]\nlinear = dlaas_linear_runtime:FORMATS\n")
    rng = np.random.default_rng(0)
    model = tmp_path / "scores.linear"
    with model.open("wb") as f:
        np.savez(f, w=rng.random((16, 3)), b=rng.random(3))
    env = {**os.environ, "MLFLOW_EXPERIMENT_NAME": tracking,
           "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}

    def infer(runtime: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mlflow_dlaas.workloads.infer", "--runtime", runtime,
             "--model_uri", str(model), "--batch_sizes", "1,4", "--scenarios",
             "single_stream,offline", "--min_query_count", "50", "--min_duration_s", "0.2"],
            env=env, capture_output=True, text=True, timeout=600)

    done = infer("linear")
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = runs_of(tracking)
    assert run.info.status == "FINISHED"
    assert run.data.params["model"] == "scores"
    assert run.data.tags[RUNTIME_TAG] == "linear"
    assert run.data.metrics["single_stream/batch_1/latency_p50_ms"] > 0
    assert run.data.metrics["equivalence/max_abs_error"] <= 1e-5
    refused = infer("onnxruntime")
    assert refused.returncode == 2
    assert ("the onnxruntime runtime cannot load a linear model; serve it with linear"
            in refused.stderr.strip().splitlines()[-1])
