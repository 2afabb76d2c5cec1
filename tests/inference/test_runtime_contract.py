"""Every inference runtime keeps one contract (mlflow_dlaas.testing.runtime_contract), and a
sixth, a plug-in registered through the entry-point group alone, keeps it too."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlflow_dlaas.backends import (
    RUNTIME_GROUP,
    RUNTIMES,
    available_runtimes,
    get_runtime,
)
from mlflow_dlaas.runs.schema import RUNTIME_TAG
from mlflow_dlaas.testing.runtime_contract import check_runtime
from tests.conftest import ROOT, runs_of

PLUGIN = Path(__file__).parent / "plugin" / "dlaas_torchscript_runtime.py"
PLUGIN_NAME = "torchscript"


@pytest.mark.parametrize("name", list(RUNTIMES))
def test_every_built_in_runtime_keeps_the_contract(name: str, tmp_path: Path) -> None:
    runtime = get_runtime(name)
    if importlib.util.find_spec(runtime.module) is None:
        pytest.skip(f"{runtime.module} is not installed in this environment (extra: "
                    f"{runtime.extra}); projects/{name} tests it in its own environment")
    check_runtime(type(runtime), tmp_path)


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plug-in as pip would leave it, in a folder on the path (returned): its module, and
    a dist-info whose entry points name it."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the plug-in traces a PyTorch model (extra: torch)")
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(PLUGIN, site / PLUGIN.name)
    info = site / "dlaas_torchscript_runtime-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dlaas-torchscript-runtime\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{RUNTIME_GROUP}]\n{PLUGIN_NAME} = dlaas_torchscript_runtime:TorchScriptRuntime\n")
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
