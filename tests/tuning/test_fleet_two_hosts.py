"""A fleet of two hosts made on this machine as network namespaces (1 core and 2 cores),
each running its own study of one spec against one PostgreSQL (Optuna's storage) and one
`mlflow server`, both reached over the hosts' veth addresses; one host's worker killed
mid-trial and resumed; the report sets the hosts side by side, never pooled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.postgres import OwnPostgres
from tests.tuning.netns import NamespaceHost
from tests.tuning.servers import MlflowServer
from tests.tuning.studies import CHEAP_FIXED

pytestmark = [pytest.mark.slow]

CLASS_OF_THIS_HOST = ("from mlflow_dlaas.environment import fingerprint, host_class; "
                      "print(host_class(fingerprint()))")


def _on(host: NamespaceHost, argv: list[str], env: dict[str, str], **kwargs: object
        ) -> subprocess.Popen[str]:
    return subprocess.Popen(host.command(argv), env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, **kwargs)


def _running_trial(client: mlflow.MlflowClient, experiment: str, host_class: str,
                   timeout_s: float = 240) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = client.get_experiment_by_name(experiment)
        if found is not None:
            for run in client.search_runs([found.experiment_id],
                                          "attributes.status = 'RUNNING'"):
                if run.data.tags.get("dlaas.host_class") == host_class and \
                        run.data.tags.get("dlaas.role") == "trial":
                    return run.info.run_id
        time.sleep(0.3)
    raise AssertionError(f"no trial of {host_class} ran within {timeout_s} s")


def test_two_hosts_measure_every_point_and_the_report_sets_them_side_by_side(
        cli_path: str, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the fleet's trials train with PyTorch (extra: torch)")
    hosts = [NamespaceHost(1, [0]), NamespaceHost(2, [0, 1])]
    postgres = server = None
    try:
        postgres = OwnPostgres(listen=("127.0.0.1", *(h.gateway for h in hosts)))
        storage = postgres.database("fleet_optuna")
        server = MlflowServer(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "artifacts",
                              host="0.0.0.0")
        server.start()
        name = f"fleet-{os.getpid()}"
        spec = tmp_path / "fleet.yaml"
        spec.write_text(yaml.safe_dump({
            "name": name, "frameworks": ["pytorch"], "fixed": dict(CHEAP_FIXED),
            "objectives": [{"metric": "train_time_seconds", "direction": "minimize"}],
            "sampler": "grid", "replicates": 4, "search_space": {"batch_size": [16, 32]}}))
        base = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}

        def env_of(host: NamespaceHost) -> dict[str, str]:
            return {**base, "MLFLOW_TRACKING_URI": f"http://{host.gateway}:{server.port}"}

        def storage_of(host: NamespaceHost) -> str:
            return storage.replace("127.0.0.1", host.gateway)

        classes = [subprocess.run(h.command([sys.executable, "-c", CLASS_OF_THIS_HOST]),
                                  capture_output=True, text=True, check=True).stdout.strip()
                   for h in hosts]
        assert classes[0] != classes[1] and "-1c-" in classes[0] and "-2c-" in classes[1]
        workers = [_on(h, [cli_path, "study", str(spec), "--fleet", "--storage",
                           storage_of(h)], env_of(h)) for h in hosts]
        client = mlflow.MlflowClient(server.url)
        _running_trial(client, name, classes[1])
        os.killpg(workers[1].pid, signal.SIGKILL)  # host 2's worker dies mid-trial
        workers[1].wait(timeout=60)
        resumed = _on(hosts[1], [cli_path, "study", str(spec), "--fleet", "--storage",
                                 storage_of(hosts[1])], env_of(hosts[1]))  # while 1 runs on
        for worker in (workers[0], resumed):
            output = worker.communicate(timeout=600)[0]
            assert worker.returncode == 0, output[-3000:]
            assert "grid: 2 of 2 points measured" in output, output[-3000:]
        assert "is gone" in output, output[-3000:]  # the killed worker's trial, given up

        direct = storage.replace("postgresql://", "postgresql+psycopg://")
        for host_class in classes:
            study = optuna.load_study(study_name=f"{name}@{host_class}", storage=direct)
            complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
            assert sorted(t.params["batch_size"] for t in complete) == [16, 32]
            assert not [t for t in study.trials if t.state == TrialState.RUNNING]
        experiment = client.get_experiment_by_name(name)
        runs = client.search_runs([experiment.experiment_id], max_results=1000)
        assert not [r for r in runs if r.info.status == "RUNNING"]
        for host_class in classes:
            measured = [r for r in runs if r.data.tags.get("dlaas.host_class") == host_class
                        and r.data.tags.get("dlaas.role") == "trial"
                        and r.info.status == "FINISHED" and not r.data.tags.get("dlaas.orphaned")]
            assert len(measured) == 8, host_class

        report = tmp_path / "report"
        # the two "hosts" share this machine's two cores, so each disturbs the other's runs
        out = subprocess.run([cli_path, "compare", "--experiment", name, "--output",
                              str(report), "--no-run", "--include-disturbed",
                              "--price", f"{classes[0]}=0.05", "--price", f"{classes[1]}=0.10",
                              "--price-source", "a test's own", "--price-date", "2026-12-07"],
                             env={**base, "MLFLOW_TRACKING_URI":
                                                             server.url},
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        text = (report / "report.md").read_text()
        side_by_side = text.split("## Which machine", 1)[1].split("\n## Host", 1)[0]
        assert "lowest train_time" in side_by_side, side_by_side
        assert "ratio" in side_by_side and "95 % CI" in side_by_side, side_by_side  # 4 vs 4
        assert all(c in side_by_side for c in classes), side_by_side
        assert side_by_side.count("per training run") == 2, side_by_side  # each host's cost
        assert "prices per hour: a test's own, 2026-12-07" in side_by_side, side_by_side
        assert f"cores allowed: {classes[0]} 1, {classes[1]} 2" in side_by_side or \
            f"cores allowed: {classes[1]} 2, {classes[0]} 1" in side_by_side, side_by_side
        assert all(f"## Host {c}" in text for c in classes)  # each host its own section
    finally:
        if server is not None:
            server.stop()
        if postgres is not None:
            postgres.stop()
        for host in hosts:
            host.remove()
