"""Library settings: validated values, the files they preload, and the read-back in real
processes (a library preloaded into a fresh Python serves its entry points)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlflow_dlaas.config import TrainConfig
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.libraries.readback import problems, read_back
from mlflow_dlaas.libraries.settings import library_environment, library_file
from mlflow_dlaas.parallelism import ParallelismSettings, worker_environment

ROOT = Path(__file__).resolve().parents[2]


def installed(setting: str, choice: str) -> Path:
    """The library's file, or skip saying how to install it."""
    try:
        return library_file(setting, choice)
    except ConfigError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize(("params", "message"), [
    ({"openmp_runtime": "llvm"}, "openmp_runtime must be one of default, gnu, intel"),
    ({"allocator": "mimalloc"}, "allocator must be one of default, jemalloc, tcmalloc"),
    ({"onednn": "maybe"}, "onednn must be one of"),
    ({"omp_proc_bind": "tight"}, "omp_proc_bind must be one of"),
    ({"omp_places": "everywhere"}, "omp_places must be threads, cores"),
    ({"kmp_affinity": "compact,sideways"}, "'sideways' is not one of Intel's KMP_AFFINITY"),
    ({"kmp_blocktime": "soon"}, "kmp_blocktime must be milliseconds"),
    ({"openmp_runtime": "gnu", "kmp_blocktime": "0"}, "read by Intel's OpenMP only"),
])
def test_invalid_library_settings_are_refused_with_the_valid_values(
        params: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_params({"framework": "pytorch", **params})


def test_library_settings_round_trip_through_params() -> None:
    params = {"framework": "pytorch", "openmp_runtime": "Intel", "allocator": "jemalloc",
              "onednn": "off", "omp_proc_bind": "spread,close", "omp_places": "cores(2)",
              "kmp_affinity": "granularity=fine,compact,1,0", "kmp_blocktime": "0"}
    config = TrainConfig.from_params(params)
    assert config.parallelism.openmp_runtime == "intel"
    again = TrainConfig.from_params({k: str(v) for k, v in config.as_params().items()})
    assert again == config


def test_preloads_come_before_the_users_own_and_policies_become_variables(
        monkeypatch: pytest.MonkeyPatch) -> None:
    jemalloc = installed("allocator", "jemalloc")
    iomp = installed("openmp_runtime", "intel")
    monkeypatch.setenv("LD_PRELOAD", "/opt/mine.so")
    settings = ParallelismSettings(openmp_runtime="intel", allocator="jemalloc",
                                   kmp_blocktime="0", omp_wait_policy="passive")
    env = worker_environment(settings, {})
    assert env["LD_PRELOAD"] == f"{iomp}:{jemalloc}:/opt/mine.so"
    assert env["KMP_BLOCKTIME"] == "0" and env["OMP_WAIT_POLICY"] == "passive"
    assert library_environment(ParallelismSettings()) == {}


def test_a_library_that_is_not_installed_is_an_error_saying_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    with pytest.raises(ConfigError, match=r"libiomp5.so.*intel-openmp.*not installed"):
        library_environment(ParallelismSettings(openmp_runtime="intel"))


def _read_back_in_fresh_python(preload: list[Path], env: dict[str, str]) -> dict:
    code = ("import json, dataclasses; from mlflow_dlaas.libraries.readback import read_back; "
            "print(json.dumps(dataclasses.asdict(read_back())))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, **env, "PYTHONPATH": str(ROOT),
                              "LD_PRELOAD": ":".join(map(str, preload))})
    return json.loads(out.stdout)


@pytest.mark.parametrize("allocator", ["jemalloc", "tcmalloc"])
def test_a_preloaded_allocator_serves_malloc_and_free(allocator: str) -> None:
    path = installed("allocator", allocator)
    found = _read_back_in_fresh_python([path], {})
    assert set(found["allocator_served_by"].values()) == {os.path.realpath(path)}
    assert os.path.realpath(path) in found["mapped"]


def test_preloaded_intel_openmp_serves_gomp_and_reads_its_policies() -> None:
    path = installed("openmp_runtime", "intel")
    found = _read_back_in_fresh_python([path], {"KMP_BLOCKTIME": "7",
                                                "OMP_PROC_BIND": "spread"})
    assert set(found["openmp_served_by"].values()) == {os.path.realpath(path)}
    assert found["openmp"]["kmp_blocktime_ms"] == 7
    assert found["openmp"]["proc_bind"] == 4  # spread, as the runtime itself reports


def test_settings_not_in_force_are_named_with_what_serves_instead() -> None:
    jemalloc = installed("allocator", "jemalloc")
    here = read_back()  # this process: glibc's malloc, no preload
    issues = problems(ParallelismSettings(allocator="jemalloc", onednn="off"), here, "test")
    assert any(f"allocator=jemalloc preloaded {os.path.realpath(jemalloc)}, but malloc is "
               "served by" in i and "libc" in i for i in issues), issues
    assert any("onednn=off: test reports no oneDNN state" in i for i in issues), issues


def test_study_specs_search_library_settings_as_categorical_dimensions() -> None:
    import yaml

    from mlflow_dlaas.tuning.spec import parse_spec

    raw = yaml.safe_load("""
frameworks: [pytorch]
entry_point: train
search_space:
  openmp_runtime: [default, gnu, intel]
  allocator: [default, jemalloc, tcmalloc]
  onednn: [on, off]  # YAML booleans, read as on / off
objectives: [{metric: train_time, direction: minimize}]
""")
    spec = parse_spec(raw, default_name="libraries")
    dims = {d.name: d for d in spec.search_space}
    assert dims["allocator"].kind == "categorical"
    assert dims["openmp_runtime"].choices == ("default", "gnu", "intel")
    raw["search_space"]["allocator"] = ["default", "hoard"]
    with pytest.raises(ConfigError, match="search_space.allocator='hoard'.*jemalloc"):
        parse_spec(raw, default_name="libraries")
