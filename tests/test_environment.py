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
    write_fingerprint,
)
from mlflow_dlaas.run_context import DlaasRunContextProvider
from mlflow_dlaas.runs.schema import ENV_TAG_PREFIX as TAG_PREFIX
from mlflow_dlaas.runs.schema import HOST_TAG
from mlflow_dlaas.runs.store_uri import ACTIVE_ENV

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
    assert tags == {TAG_PREFIX + "cpu_logical_cores": "1", TAG_PREFIX + "cpu_model": "x" * 500}


def test_only_identity_and_versions_are_tags_the_rest_is_detail() -> None:
    tags = as_tags({"cpu_model": "AMD EPYC", "torch_version": "2.13", "env_OMP_NUM_THREADS": "1",
                    "cpu_flags": "avx2 fma", "cpu_microcode": "0x1", "torch_parallel_info": "..."})
    assert set(tags) == {TAG_PREFIX + k for k in ("cpu_model", "torch_version",
                                                  "env_OMP_NUM_THREADS")}


def test_the_whole_fingerprint_is_written_for_the_artifact(tmp_path: Path) -> None:
    data = fingerprint()
    written = write_fingerprint(tmp_path / "environment", data)
    assert json.loads((written / "fingerprint.json").read_text())["cpu_flags"] == data["cpu_flags"]


def test_the_host_hash_is_also_its_own_tag() -> None:
    tags = as_tags({"cpu_model": "AMD EPYC", "host_hash": "0123456789ab"})
    assert tags[HOST_TAG] == tags[TAG_PREFIX + "host_hash"] == "0123456789ab"


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
    assert tags[TAG_PREFIX + "env_OMP_NUM_THREADS"] == "1"
    assert TAG_PREFIX + "cpu_model" in tags
    assert tags[HOST_TAG] == tags[TAG_PREFIX + "host_hash"]
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
    assert tags[TAG_PREFIX + "env_MKL_CONN"] == NOT_RECORDED
    assert "SECRET" not in json.dumps(tags)
