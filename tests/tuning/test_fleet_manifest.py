"""`mlflow-dlaas fleet manifest`: Kubernetes Indexed Jobs checked offline against the
Kubernetes schemas, the URIs never literal; the systemd form; bad input refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

SPEC = "examples/threading_pytorch.yaml"


def _manifest(cli: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([cli, "fleet", "manifest", SPEC, *args], capture_output=True,
                          text=True, timeout=120)


def test_the_jobs_validate_against_the_kubernetes_schemas(cli_path: str) -> None:
    kubernetes_validate = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate missing (extra: dev)")
    out = _manifest(cli_path, "--hosts", "c7i.large=2", "--hosts", "m7a.xlarge=1:4:8Gi")
    assert out.returncode == 0, out.stderr
    documents = list(yaml.safe_load_all(out.stdout))
    assert [d["kind"] for d in documents] == ["ConfigMap", "Job", "Job"]
    for document in documents:
        kubernetes_validate.validate(document, "1.33", strict=True)
    jobs = documents[1:]
    assert yaml.safe_load(documents[0]["data"]["spec.yaml"]) == \
        yaml.safe_load(Path(SPEC).read_text())
    for job, (host_class, count, cpus, memory) in zip(
            jobs, [("c7i.large", 2, "2", "4Gi"), ("m7a.xlarge", 1, "4", "8Gi")], strict=True):
        spec = job["spec"]
        assert spec["completionMode"] == "Indexed" and spec["completions"] == count
        pod = spec["template"]["spec"]
        assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": host_class}
        (container,) = pod["containers"]
        resources = container["resources"]
        assert resources["requests"] == resources["limits"] == {"cpu": cpus, "memory": memory}
        assert container["command"][-2:] == ["--host-class", host_class]
        assert {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in container["env"]} \
            == {"MLFLOW_TRACKING_URI": "tracking-uri", "MLFLOW_DLAAS_STORAGE": "storage-url"}
        assert all("value" not in e for e in container["env"])  # never a literal URI


def test_the_systemd_form_reads_the_uris_from_a_file(cli_path: str) -> None:
    out = _manifest(cli_path, "--hosts", "c7i.large=2", "--form", "systemd")
    assert out.returncode == 0, out.stderr
    assert "EnvironmentFile=/etc/mlflow-dlaas/fleet.env" in out.stdout
    assert "--host-class c7i.large" in out.stdout and "CPUQuota=200%" in out.stdout
    assert "://" not in out.stdout


@pytest.mark.parametrize("hosts", ["c7i.large", "c7i.large=0", "c7i large=2", "x=1:2:4GB"])
def test_a_bad_hosts_value_is_refused_with_the_form_to_write(cli_path: str, hosts: str) -> None:
    out = _manifest(cli_path, "--hosts", hosts)
    assert out.returncode == 2 and "CLASS=N[:CPUS[:MEMORY]]" in out.stderr, out.stderr
    assert out.stdout == ""
