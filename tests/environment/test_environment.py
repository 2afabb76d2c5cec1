"""The environment fingerprint: content, allow-list, run context provider, CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import mlflow
import pytest

from mlflow_dlaas.environment import (
    NOT_RECORDED,
    as_tags,
    fingerprint,
    performance_env,
    version_in,
    write_fingerprint,
)
from mlflow_dlaas.run_context import DlaasRunContextProvider
from mlflow_dlaas.runs.schema import ENV_TAG_PREFIX as TAG_PREFIX
from mlflow_dlaas.runs.schema import HOST_TAG
from mlflow_dlaas.store.store_uri import ACTIVE_ENV

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value-123",
    "MLFLOW_TRACKING_PASSWORD": "mlflow-password-456",
    "TF_API_TOKEN": "tf-token-789",
    "TF_VAR_db_password": "terraform-var-000",
    "OMP_AUTH_KEY": "omp-key-111",
    "GITHUB_TOKEN": "gh-token-222",
}


def test_allow_list_keeps_thread_settings_and_drops_secrets() -> None:
    environ = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "0",
               "HOME": "/root", **SECRETS}
    kept = performance_env(environ)
    assert kept == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "0"}


def test_fingerprint_describes_this_machine() -> None:
    data = fingerprint()
    assert data["cpu_logical_cores"] >= 1
    assert data["memory_total_bytes"] > 0
    assert data["python"].count(".") == 2
    assert data["mlflow_version"] == "3.17.2"
    assert "gpu_count" in data
    assert {"cpu_vendor", "cpu_family", "cpu_model_number", "cpu_stepping", "cpu_microcode",
            "cpu_flags", "cpu_hypervisor", "numa_nodes"} <= set(data)
    assert len(data["host_hash"]) == 12
    assert fingerprint()["host_hash"] == data["host_hash"]


def test_gpu_absence_is_reported_not_raised() -> None:
    data = fingerprint()
    if data["gpu_count"]:
        pytest.skip("this machine has an NVIDIA GPU; the absent path is covered by the fake NVML")
    assert data["gpu_status"]


def test_tags_are_short_strings() -> None:
    tags = as_tags({"cpu_logical_cores": 1, "cpu_model": "x" * 10_000, "gpu_models": None})
    assert tags == {TAG_PREFIX + "cpu_model": "x" * 500}


def test_the_cpu_and_one_line_of_versions_are_tags_the_rest_is_detail() -> None:
    """A run's overview lists its tags above its description in a narrow window: the
    fingerprint is four tags at most, the rest in environment/fingerprint.json."""
    tags = as_tags({"cpu_model": "AMD EPYC", "python": "3.11.7", "torch_version": "2.13",
                    "numpy_version": "1.23.5", "env_OMP_NUM_THREADS": "1",
                    "cpu_flags": "avx2 fma", "cpu_microcode": "0x1", "torch_parallel_info": "...",
                    "cpu_logical_cores": 2, "os_release": "Debian"})
    assert tags == {TAG_PREFIX + "cpu_model": "AMD EPYC",
                    TAG_PREFIX + "versions": "python 3.11.7, torch 2.13, numpy 1.23.5",
                    TAG_PREFIX + "variables": "OMP_NUM_THREADS=1"}
    assert version_in(tags, "numpy") == "1.23.5" and version_in(tags, "mxnet") == ""


def test_the_whole_fingerprint_is_written_for_the_artifact(tmp_path: Path) -> None:
    data = fingerprint()
    written = write_fingerprint(tmp_path / "environment", data)
    assert json.loads((written / "fingerprint.json").read_text())["cpu_flags"] == data["cpu_flags"]


def test_the_host_hash_is_its_own_tag() -> None:
    tags = as_tags({"cpu_model": "AMD EPYC", "host_hash": "0123456789ab"})
    assert tags[HOST_TAG] == "0123456789ab"


def test_provider_is_active_only_for_runs_we_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ACTIVE_ENV, raising=False)
    assert not DlaasRunContextProvider().in_context()
    monkeypatch.setenv(ACTIVE_ENV, "1")
    assert DlaasRunContextProvider().in_context()


def test_runs_carry_the_fingerprint_and_no_secret(
    tracking: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv(ACTIVE_ENV, "1")
    with mlflow.start_run() as run:
        pass
    tags = mlflow.MlflowClient().get_run(run.info.run_id).data.tags
    assert "OMP_NUM_THREADS=1" in tags[TAG_PREFIX + "variables"].split(", ")
    assert TAG_PREFIX + "cpu_model" in tags and tags[HOST_TAG]
    everything = json.dumps(tags)
    for value in SECRETS.values():
        assert value not in everything


def test_runs_not_started_by_us_are_left_alone(tracking: str) -> None:
    with mlflow.start_run() as run:
        pass
    tags = mlflow.MlflowClient().get_run(run.info.run_id).data.tags
    assert not any(k.startswith(TAG_PREFIX) for k in tags)


def test_env_command_prints_json(cli_path: str) -> None:
    out = subprocess.run([cli_path, "env", "--json", "--shallow"], capture_output=True,
                         text=True, check=True)
    data = json.loads(out.stdout)
    assert data["cpu_logical_cores"] >= 1


@pytest.mark.parametrize(("value", "shown"), [
    ("postgresql://u:mkl-secret@h/db", "postgresql://u:***@h/db"),
    ("host=h password=mkl-secret dbname=x", "host=h password=*** dbname=x"),
    ('{"cluster": {"worker": ["h:2222"]}, "task": {"type": "worker", "index": 0}, '
     '"token": "mkl-secret"}',
     '{"cluster": {"worker": ["h:2222"]}, "task": {"type": "worker", "index": 0}, '
     '"token": "***"}'),
    ('{"cluster": {"chief": ["h:2222"]}}', '{"cluster": {"chief": ["h:2222"]}}'),
    ("granularity=fine,compact,1,0", "granularity=fine,compact,1,0"),
    ("/opt/lib/libjemalloc.so", "/opt/lib/libjemalloc.so"),
])
def test_recorded_values_lose_their_credentials(value: str, shown: str) -> None:
    assert performance_env({"KMP_AFFINITY": value}) == {"KMP_AFFINITY": shown}


@pytest.mark.parametrize("planted", [
    {"OMP_ARG": "user:SECRET-omp-1@host"}, {"KMP_SETTINGS_EXTRA": "--passwd SECRET-kmp-2"},
    {"MKL_CONN": "postgresql://u:SECRET-mkl-3@h/db"},
    {"TF_CONFIG": '{"task": {"type": "worker"}, "password": "SECRET-tf-4"}'},
])
def test_a_variable_nobody_vetted_is_recorded_by_name_only(planted: dict[str, str]) -> None:
    kept = performance_env({**planted, "OMP_NUM_THREADS": "2"})
    assert kept == {**{name: NOT_RECORDED for name in planted}, "OMP_NUM_THREADS": "2"}
    assert "SECRET" not in json.dumps(kept)


def test_a_planted_connection_string_never_reaches_the_tags(
    tracking: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MKL_CONN", "postgresql://u:SECRET-mkl-444@h/db")
    monkeypatch.setenv("TF_CONFIG", '{"task": {"type": "worker"}, "password": "SECRET-tf-555"}')
    monkeypatch.setenv(ACTIVE_ENV, "1")
    with mlflow.start_run() as run:
        pass
    tags = mlflow.MlflowClient().get_run(run.info.run_id).data.tags
    assert f"MKL_CONN={NOT_RECORDED}" in tags[TAG_PREFIX + "variables"].split(", ")
    assert "SECRET" not in json.dumps(tags)
