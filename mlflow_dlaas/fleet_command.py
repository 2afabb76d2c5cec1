"""``mlflow-dlaas fleet``: launch one spec's studies on several host classes through an
engine that exists (Kubernetes Indexed Jobs, or a systemd unit per host)."""

from __future__ import annotations

from pathlib import Path

import click

from mlflow_dlaas.command_errors import reports_errors


@click.group("fleet")
def fleet() -> None:
    """One study per host class, the same points in each (docs/fleet.md)."""


@fleet.command("manifest")
@click.argument("spec_path", metavar="SPEC.yaml", type=click.Path(dir_okay=False))
@click.option("--hosts", "host_groups", multiple=True, required=True,
              metavar="CLASS=N[:CPUS[:MEMORY]]",
              help="N workers on hosts of CLASS, each with CPUS whole CPUs (default 2) and "
                   "MEMORY (default 4Gi); repeat for each class.")
@click.option("--form", type=click.Choice(["kubernetes", "systemd"]), default="kubernetes",
              show_default=True, help="Kubernetes Indexed Jobs, or a systemd unit per class.")
@click.option("--image", default="mlflow-dlaas:latest", show_default=True,
              help="The worker's container image (mlflow-dlaas and its frameworks inside).")
@click.option("--secret", default="mlflow-dlaas-fleet", show_default=True,
              help="The Secret whose keys tracking-uri and storage-url the workers read.")
@click.option("--node-label", default="node.kubernetes.io/instance-type", show_default=True,
              help="The node label whose value is the host class (the nodeSelector).")
@reports_errors
def manifest_command(spec_path: str, host_groups: tuple[str, ...], form: str, image: str,
                     secret: str, node_label: str) -> None:
    """Print the manifests that start SPEC.yaml's fleet: `| kubectl apply -f -`.

    The URIs are never written in them: Kubernetes reads them from the Secret, systemd from
    /etc/mlflow-dlaas/fleet.env (MLFLOW_TRACKING_URI, MLFLOW_DLAAS_STORAGE).
    """
    from mlflow_dlaas.tuning.fleet_manifest import (
        HostGroup,
        dump_all,
        kubernetes_manifests,
        plain_command,
        systemd_unit,
    )
    from mlflow_dlaas.tuning.spec import load_spec

    spec = load_spec(spec_path)  # a bad spec fails here, before any manifest
    groups = [HostGroup.parse(text) for text in host_groups]
    if form == "kubernetes":
        click.echo(dump_all(kubernetes_manifests(spec, Path(spec_path).read_text(), groups,
                                                 image=image, secret=secret,
                                                 node_label=node_label)), nl=False)
        return
    for group in groups:
        click.echo(f"# /etc/systemd/system/mlflow-dlaas-{group.host_class}.service, on each "
                   f"of the {group.hosts} hosts of {group.host_class}; or by hand:\n"
                   f"#   {plain_command(spec_path, group)}")
        click.echo(systemd_unit(spec_path, group))
