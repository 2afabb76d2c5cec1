"""Hosts made on this machine as network namespaces: each its own namespace, reached from
the machine over a veth pair, its processes held to the CPUs it is given."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Sequence

import pytest


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class NamespaceHost:
    """A host: network namespace ``name``, its address ``address`` (the machine is
    ``gateway`` on the other end of its veth pair), its processes pinned to ``cpus``."""

    def __init__(self, index: int, cpus: Sequence[int]) -> None:
        if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("taskset") is None:
            pytest.skip("hosts as network namespaces need root, iproute2 and taskset")
        tag = uuid.uuid4().hex[:6]
        self.name = f"dlaas-{tag}"
        self.outer = f"dl{tag}h"
        subnet = f"10.{200 + index}.{int(tag[:2], 16)}"
        self.gateway, self.address = f"{subnet}.1", f"{subnet}.2"
        self.cpus = tuple(cpus)
        try:
            _ip("netns", "add", self.name)
            _ip("link", "add", self.outer, "type", "veth", "peer", "name", f"dl{tag}n")
            _ip("link", "set", f"dl{tag}n", "netns", self.name)
            _ip("addr", "add", f"{self.gateway}/30", "dev", self.outer)
            _ip("link", "set", self.outer, "up")
            for args in (("addr", "add", f"{self.address}/30", "dev", f"dl{tag}n"),
                         ("link", "set", f"dl{tag}n", "up"), ("link", "set", "lo", "up")):
                _ip("netns", "exec", self.name, "ip", *args)
        except subprocess.CalledProcessError as e:
            self.remove()
            pytest.skip(f"cannot make a network namespace here: {e.stderr.decode().strip()}")

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the host: its namespace, its CPUs."""
        return ["ip", "netns", "exec", self.name, "taskset", "-c",
                ",".join(map(str, self.cpus)), *argv]

    def remove(self) -> None:
        subprocess.run(["ip", "link", "del", self.outer], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)
