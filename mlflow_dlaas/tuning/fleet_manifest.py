"""How a fleet is launched, by engines that exist: a Kubernetes Indexed Job per host class
(a nodeSelector per class, requests equal to limits in whole CPUs for the Guaranteed QoS
class, so that a kubelet with the static CPU manager pins them; the tracking and storage
URIs from a Secret, never literal), or, for hosts without Kubernetes, one systemd unit per
class whose URIs come from an environment file. Not Ray or Dask: both rewrite the thread and
allocator variables a study varies."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mlflow_dlaas.environment import HOST_CLASS_NAME
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.tuning.spec import StudySpec

#: the Secret's keys (and the systemd environment file's variables) for the two URIs
TRACKING_KEY, STORAGE_KEY = "tracking-uri", "storage-url"
TRACKING_ENV, STORAGE_ENV = "MLFLOW_TRACKING_URI", "MLFLOW_DLAAS_STORAGE"
#: where the worker's container finds the spec (a ConfigMap mounted there)
SPEC_MOUNT = "/etc/mlflow-dlaas"
#: the node label a class selects by default (a cloud's instance type)
DEFAULT_NODE_LABEL = "node.kubernetes.io/instance-type"
ENV_FILE = "/etc/mlflow-dlaas/fleet.env"
MEMORY = re.compile(r"[1-9][0-9]*(Mi|Gi)")


@dataclass(frozen=True)
class HostGroup:
    """``CLASS=N[:CPUS[:MEMORY]]``: N hosts of a class, each worker's whole CPUs and memory."""

    host_class: str
    hosts: int
    cpus: int = 2
    memory: str = "4Gi"

    @classmethod
    def parse(cls, text: str) -> HostGroup:
        name, _, rest = text.partition("=")
        parts = rest.split(":") if rest else []
        try:
            hosts = int(parts[0])
            cpus = int(parts[1]) if len(parts) > 1 else 2
        except (IndexError, ValueError):
            hosts = cpus = 0
        memory = parts[2] if len(parts) > 2 else "4Gi"
        if (not HOST_CLASS_NAME.fullmatch(name) or hosts < 1 or cpus < 1 or len(parts) > 3
                or not MEMORY.fullmatch(memory)):
            raise ConfigError(f"--hosts {text!r}: write CLASS=N[:CPUS[:MEMORY]], e.g. "
                              "c7i.large=2 or c7i.xlarge=1:4:8Gi (whole CPUs, memory in Mi "
                              "or Gi; a class is letters, digits, '.', '_' or '-')")
        return cls(name, hosts, cpus, memory)


def kubernetes_manifests(spec: StudySpec, spec_text: str, groups: list[HostGroup], *,
                         image: str, secret: str, node_label: str = DEFAULT_NODE_LABEL
                         ) -> list[dict[str, Any]]:
    """A ConfigMap holding the spec, then an Indexed Job per host class."""
    base = _dns_name(spec.name)
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": f"{base}-spec", "labels": _labels(spec.name)},
              "data": {"spec.yaml": spec_text}}
    return [config, *(_job(spec, g, base, image, secret, node_label) for g in groups)]


def _job(spec: StudySpec, group: HostGroup, base: str, image: str, secret: str,
         node_label: str) -> dict[str, Any]:
    labels = {**_labels(spec.name), "mlflow-dlaas/host-class": _label_value(group.host_class)}
    resources = {"cpu": str(group.cpus), "memory": group.memory}
    container = {
        "name": "worker", "image": image,
        "command": ["mlflow-dlaas", "study", f"{SPEC_MOUNT}/spec.yaml",
                    "--host-class", group.host_class],
        "env": [_from_secret(TRACKING_ENV, secret, TRACKING_KEY),
                _from_secret(STORAGE_ENV, secret, STORAGE_KEY)],
        "resources": {"requests": resources, "limits": dict(resources)},
        "volumeMounts": [{"name": "spec", "mountPath": SPEC_MOUNT, "readOnly": True}],
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": _dns_name(f"{base}-{group.host_class}"), "labels": labels},
        "spec": {
            "completionMode": "Indexed", "completions": group.hosts,
            "parallelism": group.hosts, "backoffLimitPerIndex": 3,
            "maxFailedIndexes": group.hosts,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"restartPolicy": "Never",
                         "nodeSelector": {node_label: group.host_class},
                         "containers": [container],
                         "volumes": [{"name": "spec",
                                      "configMap": {"name": f"{base}-spec"}}]},
            },
        },
    }


def systemd_unit(spec_path: str, group: HostGroup) -> str:
    """A unit for each host of the class: the URIs from :data:`ENV_FILE` (mode 0600)."""
    return "\n".join([
        "[Unit]", f"Description=mlflow-dlaas fleet worker ({group.host_class})",
        "After=network-online.target", "Wants=network-online.target", "",
        "[Service]", "Type=exec", f"EnvironmentFile={ENV_FILE}",
        f"ExecStart=mlflow-dlaas study {Path(spec_path).resolve()} --host-class "
        f"{group.host_class}",
        f"CPUQuota={100 * group.cpus}%", f"MemoryMax={group.memory.replace('i', '')}",
        "Restart=on-failure", "RestartSec=30", "KillSignal=SIGTERM", "TimeoutStopSec=120",
        "", "[Install]", "WantedBy=multi-user.target", ""])


def plain_command(spec_path: str, group: HostGroup) -> str:
    """The one command a host without Kubernetes runs (the URIs in its environment)."""
    return (f"{TRACKING_ENV}=... {STORAGE_ENV}=... mlflow-dlaas study "
            f"{Path(spec_path).resolve()} --host-class {group.host_class}")


class _Dumper(yaml.SafeDumper):
    """YAML as a person reads it: a multi-line string (the spec) as a literal block."""


_Dumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def dump_all(documents: list[dict[str, Any]]) -> str:
    """The documents as one YAML stream (``kubectl apply -f -``)."""
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False)


def _from_secret(variable: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def _labels(study: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "mlflow-dlaas", "mlflow-dlaas/study": _label_value(study)}


def _label_value(text: str) -> str:
    """A label value: at most 63 of letters, digits, '-', '_', '.', alphanumeric at the ends."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)[:63].strip("-_.") or "x"


def _dns_name(text: str) -> str:
    """An object name (RFC 1123 label): lower case, digits and '-', at most 56 (an
    Indexed Job's pods are named ``<job>-<index>-<suffix>``)."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower())[:56].strip("-") or "dlaas"
