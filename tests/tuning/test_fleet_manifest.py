"""`mlflow-dlaas fleet manifest`: Kubernetes Indexed Jobs checked offline against the
Kubernetes schemas, the URIs never literal; the systemd form; bad input refused."""

from __future__ import annotations

import re
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


def test_study_fleet_names_this_hosts_study_and_refuses_a_bad_class(
        cli_path: str, tmp_path: Path) -> None:
    named = subprocess.run([cli_path, "study", SPEC, "--dry-run", "--host-class", "c7i.large"],
                           capture_output=True, text=True, timeout=120)
    assert named.returncode == 0, named.stderr
    assert "study 'threading-pytorch@c7i.large' (experiment 'threading-pytorch')" in \
        named.stdout
    assert "fleet: this host's class c7i.large" in named.stdout
    derived = subprocess.run([cli_path, "study", SPEC, "--dry-run", "--fleet"],
                             capture_output=True, text=True, timeout=120)
    assert derived.returncode == 0, derived.stderr
    assert re.search(r"study 'threading-pytorch@[a-z0-9-]+-\d+c-[0-9a-f]{6}'", derived.stdout)
    bad = subprocess.run([cli_path, "study", SPEC, "--dry-run", "--host-class", "c7i large"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "a host class is" in bad.stderr, bad.stderr
    spec = tmp_path / "at.yaml"
    spec.write_text(Path(SPEC).read_text().replace("name: threading-pytorch",
                                                   "name: threading@x"))
    at = subprocess.run([cli_path, "study", str(spec), "--dry-run", "--fleet"],
                        capture_output=True, text=True, timeout=120)
    assert at.returncode == 2 and "holds '@'" in at.stderr, at.stderr
