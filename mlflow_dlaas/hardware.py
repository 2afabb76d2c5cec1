"""The machine's hardware: CPU identity and features, NUMA nodes, hypervisor, host hash.

Read from /proc and /sys, never by running a command. The parsers are pure functions of
the files' text, so that tests feed them samples of other machines.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
NUMA_NODES = Path("/sys/devices/system/node")
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")
#: Where a guest learns its hypervisor's name, most telling first (lscpu reads CPUID instead).
HYPERVISOR_HINTS = (
    "/sys/hypervisor/type",
    "/sys/devices/system/clocksource/clocksource0/available_clocksource",
    "/sys/class/dmi/id/sys_vendor",
)
#: A word found in a hint, and the vendor name lscpu prints for it.
HYPERVISOR_NAMES = {"xen": "Xen", "kvm": "KVM", "hyperv": "Microsoft", "microsoft": "Microsoft",
                    "vmware": "VMware", "qemu": "QEMU"}
#: Flags that choose a framework's kernels, besides the AVX and AMX families and any BF16.
FRAMEWORK_FLAGS = frozenset({"fma", "f16c"})
#: Fingerprint entries that define the hardware a figure depends on (no names, nothing per boot).
HOST_HASH_KEYS = ("cpu_model", "cpu_family", "cpu_model_number", "cpu_stepping", "cpu_flags",
                  "cpu_logical_cores", "numa_nodes")
HOST_HASH_CHARS = 12
GIB_BYTES = 2**30


def parse_cpuinfo(text: str) -> dict[str, str]:
    """The fields of the first processor in /proc/cpuinfo text (on x86 all of them agree)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() and fields:
            break
        key, colon, value = line.partition(":")
        if colon:
            fields.setdefault(key.strip(), value.strip())
    return fields


def framework_flags(flags: Iterable[str]) -> list[str]:
    """The flags that matter to frameworks: avx*, avx512*, avx_vnni, amx*, fma, f16c, *bf16*."""
    return sorted({f for f in flags
                   if f.startswith(("avx", "amx")) or f in FRAMEWORK_FLAGS or "bf16" in f})


def cpu_identity(fields: Mapping[str, str]) -> dict[str, Any]:
    """Vendor, model name, family / model / stepping, microcode and framework flags."""
    flags = _flags(fields)
    return {
        "cpu_vendor": fields.get("vendor_id"),
        "cpu_model": fields.get("model name"),
        "cpu_family": _whole(fields.get("cpu family")),
        "cpu_model_number": _whole(fields.get("model")),
        "cpu_stepping": _whole(fields.get("stepping")),
        "cpu_microcode": fields.get("microcode"),
        "cpu_flags": ",".join(framework_flags(flags)) if flags else None,
    }


def hypervisor(flags: Collection[str], hints: Sequence[str | None]) -> str:
    """The hypervisor's vendor as lscpu names it; "none" on bare metal (no CPU flag).

    ``hints`` are the texts of :data:`HYPERVISOR_HINTS`; "unknown" when none names one.
    """
    if "hypervisor" not in flags:
        return "none"
    for hint in hints:
        for word, name in HYPERVISOR_NAMES.items():
            if hint and word in hint.lower():
                return name
    return "unknown"


def numa_node_count(root: Path = NUMA_NODES) -> int | None:
    """NUMA nodes the kernel shows (node0, node1, ...); None without that folder."""
    try:
        return sum(1 for p in root.iterdir() if re.fullmatch(r"node\d+", p.name))
    except OSError:
        return None


def nvidia_gpu_models(root: Path = NVIDIA_GPUS) -> list[str]:
    """GPU models from the NVIDIA driver's /proc files, for processes without NVML bindings."""
    models = []
    for info in sorted(root.glob("*/information")):
        found = re.search(r"^Model:\s*(.+)$", _read_text(info) or "", re.M)
        if found:
            models.append(found.group(1).strip())
    return models


def host_hash(data: Mapping[str, Any], gpu_models: Sequence[str] | None = None) -> str:
    """12 hex characters of SHA-256 over the fingerprint's hardware entries.

    Also over its memory in whole GiB and its GPU models (``gpu_models`` where the fingerprint
    has none, so that a framework environment without NVML bindings gets the same hash).
    """
    models = data.get("gpu_models")
    identity = {key: data.get(key) for key in HOST_HASH_KEYS}
    identity["memory_gib"] = round((data.get("memory_total_bytes") or 0) / GIB_BYTES)
    identity["gpu_models"] = sorted(models.split(", ") if models else gpu_models or [])
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:HOST_HASH_CHARS]


def cpu_info() -> dict[str, Any]:
    """CPU identity and features, core counts, frequency governor, NUMA nodes and memory."""
    import psutil

    fields = parse_cpuinfo(_read_text(CPUINFO) or "")
    identity = cpu_identity(fields)
    governor = _read_text(Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"))
    freq = psutil.cpu_freq()
    return {
        **identity,
        "cpu_model": identity["cpu_model"] or platform.processor() or platform.machine(),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_affinity_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else psutil.cpu_count(logical=True),
        "cpu_governor": governor or "unreadable",
        "cpu_max_mhz": round(freq.max, 1) if freq and freq.max else None,
        "cpu_hypervisor": hypervisor(_flags(fields),
                                     [_read_text(Path(p)) for p in HYPERVISOR_HINTS]),
        "numa_nodes": numa_node_count(),
        "memory_total_bytes": psutil.virtual_memory().total,
    }


def _flags(fields: Mapping[str, str]) -> list[str]:
    return (fields.get("flags") or fields.get("Features") or "").split()


def _whole(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
