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
#: FP32 FLOPs per cycle per core by the widest vector FMA the CPU has, assuming two FMA
#: pipes per core (Intel from Haswell, Xeon Scalable Gold / Platinum, AMD from Zen 2):
#: lanes x 2 (a multiply-add) x 2 pipes. Source: Intel's Optimization Reference Manual
#: (ports 0 and 1 / 5 execute FMA) and AMD's Software Optimization Guides for Zen 2-5. AMD
#: before Zen 5 runs AVX-512 on 256-bit pipes, so it counts as AVX2 there; a Xeon with one
#: AVX-512 pipe (Bronze, Silver) reaches half the AVX-512 row. AMX multiplies BF16 / INT8
#: only, so it adds nothing to an FP32 peak.
FP32_FLOPS_PER_CYCLE = (("avx512f", 64), ("fma", 32), ("avx", 16), ("sse2", 8))
#: AMD families whose AVX-512 executes on 256-bit pipes (Zen 4 is family 25).
AMD_HALF_WIDTH_AVX512_FAMILIES = frozenset({25})


#: CPU flags of native bf16 arithmetic (AVX-512 BF16, AMX); without them bf16 is emulated,
#: slower than fp32 (torch.mm: 1.5 against 65 GFLOP/s on a 2-core AVX2 EPYC).
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


#: The CPU flags to assume in place of /proc/cpuinfo's, comma-separated, for the decisions
#: that depend on the CPU (native bf16): how the suite runs the branch of a CPU it is not on.
ASSUMED_FLAGS_VARIABLE = "DLAAS_ASSUME_CPU_FLAGS"


def decision_flags() -> list[str]:
    """The CPU flags that decide what this machine can measure: /proc/cpuinfo's, or those
    :data:`ASSUMED_FLAGS_VARIABLE` names where it is set."""
    assumed = os.environ.get(ASSUMED_FLAGS_VARIABLE)
    if assumed is not None:
        return [f.strip() for f in assumed.split(",") if f.strip()]
    return _flags(parse_cpuinfo(_read_text(CPUINFO) or ""))


def assumed_flags_key() -> str:
    """'' on the CPU as it is; ``-assumed-<hash>`` where :data:`ASSUMED_FLAGS_VARIABLE` is
    set: what a cache of CPU-dependent figures adds to its key, so that a run with assumed
    flags never hands its figures to one without."""
    assumed = os.environ.get(ASSUMED_FLAGS_VARIABLE)
    if assumed is None:
        return ""
    return "-assumed-" + hashlib.sha256(assumed.encode()).hexdigest()[:8]


def emulated_bf16_reason(flags: Iterable[str] | None = None) -> str:
    """Why bf16 would be emulated on this CPU (``flags``: its /proc/cpuinfo flags, default
    :func:`decision_flags`), or '' where it has native bf16 units."""
    if flags is None:
        flags = decision_flags()
    if set(flags) & set(NATIVE_BF16_FLAGS):
        return ""
    return (f"this CPU has no native bf16 ({' or '.join(NATIVE_BF16_FLAGS)}): bf16 would be "
            "emulated, slower than fp32, so it is not measured here; use fp32 (or int8), or "
            "a CPU with AVX-512 BF16 or AMX")


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


def fp32_flops_per_cycle(fields: Mapping[str, str]) -> tuple[int | None, str]:
    """(FP32 FLOPs per cycle per core, the ISA row used) from /proc/cpuinfo's fields, by
    :data:`FP32_FLOPS_PER_CYCLE`; None with the reason where no row applies (not x86)."""
    flags = set(_flags(fields))
    for isa, flops in FP32_FLOPS_PER_CYCLE:
        if isa not in flags:
            continue
        if (isa == "avx512f" and fields.get("vendor_id") == "AuthenticAMD"
                and _whole(fields.get("cpu family")) in AMD_HALF_WIDTH_AVX512_FAMILIES):
            return FP32_FLOPS_PER_CYCLE[1][1], "avx512f on 256-bit pipes (AMD Zen 4)"
        return flops, isa
    return None, "no x86 vector flags in /proc/cpuinfo: no FLOPs-per-cycle row applies"


def peak_clock_mhz(fields: Mapping[str, str], cpufreq_max_mhz: float | None
                   ) -> tuple[float | None, str]:
    """(the clock a peak is computed at, where it comes from): cpufreq's maximum, else the
    clock /proc/cpuinfo shows (a guest's, without cpufreq: its host's nominal clock, so
    turbo may run faster and the fraction of peak is then an upper bound)."""
    if cpufreq_max_mhz:
        return cpufreq_max_mhz, "cpufreq maximum"
    shown = fields.get("cpu MHz")
    try:
        return round(float(shown), 1), "/proc/cpuinfo clock (no cpufreq maximum here)"
    except (TypeError, ValueError):
        return None, "no clock: neither cpufreq nor /proc/cpuinfo gives one"


def cores_in_use(host: Mapping[str, Any], intra_op_threads: Any) -> int:
    """The physical cores a run can use: its affinity, at most the physical cores, at most
    its intra-op threads where it set a number (0 or "default": one per core)."""
    affinity = int(host.get("cpu_affinity_cores") or 1)
    cores = min(affinity, int(host.get("cpu_physical_cores") or affinity))
    if isinstance(intra_op_threads, int) and intra_op_threads > 0:
        cores = min(cores, intra_op_threads)
    return max(cores, 1)


def fp32_peak_gflops(host: Mapping[str, Any], cores: int) -> tuple[float | None, str]:
    """(the FP32 peak of ``cores`` cores in GFLOP/s, how it was derived) from a fingerprint;
    None with the reason where it cannot be derived."""
    flops, clock = host.get("cpu_fp32_flops_per_cycle"), host.get("cpu_peak_clock_mhz")
    if not flops:
        return None, f"no peak: {host.get('cpu_fp32_flops_per_cycle_from')}"
    if not clock:
        return None, f"no peak: {host.get('cpu_peak_clock_from')}"
    peak = cores * clock * flops / 1000
    return peak, (f"{cores} cores x {clock} MHz x {flops} FP32 FLOPs/cycle "
                  f"({host.get('cpu_fp32_flops_per_cycle_from')}; clock: "
                  f"{host.get('cpu_peak_clock_from')}) = {peak:.1f} GFLOP/s")


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
    max_mhz = round(freq.max, 1) if freq and freq.max else None
    flops_per_cycle, isa = fp32_flops_per_cycle(fields)
    clock, clock_source = peak_clock_mhz(fields, max_mhz)
    return {
        **identity,
        "cpu_model": identity["cpu_model"] or platform.processor() or platform.machine(),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_affinity_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else psutil.cpu_count(logical=True),
        "cpu_governor": governor or "unreadable",
        "cpu_max_mhz": max_mhz,
        "cpu_fp32_flops_per_cycle": flops_per_cycle,
        "cpu_fp32_flops_per_cycle_from": isa,
        "cpu_peak_clock_mhz": clock,
        "cpu_peak_clock_from": clock_source,
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
