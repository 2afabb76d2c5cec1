"""The hardware fingerprint: /proc/cpuinfo parsing, hypervisor, NUMA, host hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlflow_dlaas.hardware import (
    cpu_identity,
    fp32_flops_per_cycle,
    fp32_peak_gflops,
    framework_flags,
    host_hash,
    hypervisor,
    numa_node_count,
    nvidia_gpu_models,
    parse_cpuinfo,
    peak_clock_mhz,
)

INTEL_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi "
    "mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc arch_perfmon "
    "pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca "
    "sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch "
    "bmi1 hle avx2 smep bmi2 erms invpcid rtm cqm rdt_a avx512f avx512dq rdseed adx smap "
    "avx512ifma clflushopt clwb intel_pt avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec "
    "avx_vnni avx512_bf16 wbnoinvd avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes "
    "vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq la57 rdpid cldemote movdiri "
    "movdir64b enqcmd fsrm md_clear serialize tsxldtrk pconfig arch_lbr avx512_fp16 "
    "amx_bf16 amx_tile amx_int8 flush_l1d arch_capabilities"
)
INTEL = "".join(
    f"processor\t: {cpu}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
    "model name\t: Intel(R) Xeon(R) Platinum 8480+\nstepping\t: 8\nmicrocode\t: 0x2b000461\n"
    f"cpu MHz\t\t: {2000 + cpu}.000\nflags\t\t: {INTEL_FLAGS}\n\n"
    for cpu in range(2)
)
AMD = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7763 64-Core Processor
stepping\t: 1
microcode\t: 0xa0011d1
flags\t\t: fpu vme de pse tsc msr pae sse sse2 ht syscall nx mmxext pni pclmulqdq ssse3 fma \
cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm \
cmp_legacy svm cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext bmi1 avx2 smep \
bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves \
clzero xsaveerptr rdpru wbnoinvd arat npt nrip_save umip vaes vpclmulqdq rdpid fsrm

"""
HARDWARE = {"cpu_model": "AMD EPYC 7763 64-Core Processor", "cpu_family": 25,
            "cpu_model_number": 1, "cpu_stepping": 1, "cpu_flags": "avx,avx2,f16c,fma",
            "cpu_logical_cores": 8, "numa_nodes": 1, "memory_total_bytes": 33_567_000_000}


def test_intel_sample_gives_identity_and_amx_avx512_flags() -> None:
    identity = cpu_identity(parse_cpuinfo(INTEL))
    assert identity == {
        "cpu_vendor": "GenuineIntel",
        "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
        "cpu_family": 6,
        "cpu_model_number": 143,
        "cpu_stepping": 8,
        "cpu_microcode": "0x2b000461",
        "cpu_flags": "amx_bf16,amx_int8,amx_tile,avx,avx2,avx512_bf16,avx512_bitalg,"
                     "avx512_fp16,avx512_vbmi2,avx512_vnni,avx512_vpopcntdq,avx512bw,avx512cd,"
                     "avx512dq,avx512f,avx512ifma,avx512vbmi,avx512vl,avx_vnni,f16c,fma",
    }


def test_amd_sample_gives_identity_and_avx2_flags() -> None:
    identity = cpu_identity(parse_cpuinfo(AMD))
    assert identity["cpu_vendor"] == "AuthenticAMD"
    assert identity["cpu_model"] == "AMD EPYC 7763 64-Core Processor"
    assert (identity["cpu_family"], identity["cpu_model_number"], identity["cpu_stepping"]) \
        == (25, 1, 1)
    assert identity["cpu_microcode"] == "0xa0011d1"
    assert identity["cpu_flags"] == "avx,avx2,f16c,fma"


def test_only_the_first_processor_is_read() -> None:
    assert parse_cpuinfo(INTEL)["cpu MHz"] == "2000.000"


def test_unreadable_cpuinfo_gives_no_values() -> None:
    assert set(cpu_identity(parse_cpuinfo("")).values()) == {None}


def test_bf16_flags_of_other_architectures_count() -> None:
    assert framework_flags(["asimd", "bf16", "svebf16", "sve"]) == ["bf16", "svebf16"]


@pytest.mark.parametrize(
    ("cpuinfo", "hints", "expected"),
    [
        (INTEL, ["xen", "kvm-clock tsc", None], "none"),  # no CPU flag: bare metal
        (AMD, [None, "kvm-clock tsc acpi_pm", "QEMU"], "KVM"),
        (AMD, ["xen", "xen tsc hpet", "Xen"], "Xen"),
        (AMD, [None, "hyperv_clocksource_tsc_page acpi_pm", "Microsoft Corporation"],
         "Microsoft"),
        (AMD, [None, "tsc acpi_pm", "VMware, Inc."], "VMware"),
        (AMD, [None, None, None], "unknown"),
    ],
)
def test_hypervisor_from_flag_and_sys_hints(cpuinfo: str, hints: list, expected: str) -> None:
    flags = parse_cpuinfo(cpuinfo)["flags"].split()
    assert hypervisor(flags, hints) == expected


def test_numa_nodes_are_counted_from_sys(tmp_path: Path) -> None:
    for name in ("node0", "node1", "possible", "online", "has_cpu"):
        (tmp_path / name).mkdir()
    assert numa_node_count(tmp_path) == 2
    assert numa_node_count(tmp_path / "absent") is None


def test_gpu_models_from_the_driver_proc_files(tmp_path: Path) -> None:
    for bus, model in (("0000:3b:00.0", "NVIDIA H200"), ("0000:1a:00.0", "NVIDIA H100")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(f"Model: \t\t {model}\nIRQ:   \t\t 42\n")
    assert nvidia_gpu_models(tmp_path) == ["NVIDIA H100", "NVIDIA H200"]
    assert nvidia_gpu_models(tmp_path / "absent") == []


def test_host_hash_is_short_and_stable() -> None:
    digest = host_hash(HARDWARE)
    assert len(digest) == 12 and int(digest, 16) >= 0
    # names, boots and settings do not change it; memory within the same GiB does not either
    assert host_hash({**HARDWARE, "hostname": "other", "cpu_microcode": "0x1",
                      "cpu_governor": "powersave", "kernel": "6.1",
                      "memory_total_bytes": HARDWARE["memory_total_bytes"] + 2**20}) == digest


@pytest.mark.parametrize(
    "change",
    [{"cpu_model": "AMD EPYC 9654"}, {"cpu_stepping": 2}, {"cpu_flags": "avx,avx2,fma"},
     {"cpu_logical_cores": 16}, {"numa_nodes": 2}, {"memory_total_bytes": 64 * 2**30},
     {"gpu_models": "NVIDIA H200"}],
)
def test_host_hash_changes_with_the_hardware(change: dict) -> None:
    assert host_hash({**HARDWARE, **change}) != host_hash(HARDWARE)


def test_host_hash_takes_the_driver_gpu_list_where_nvml_is_missing() -> None:
    with_nvml = host_hash({**HARDWARE, "gpu_models": "NVIDIA H200, NVIDIA H100"})
    assert host_hash(HARDWARE, ["NVIDIA H100", "NVIDIA H200"]) == with_nvml


def test_flops_per_cycle_follow_the_widest_fma() -> None:
    """Sapphire Rapids: AVX-512 (AMX adds nothing to FP32); Zen 3: AVX2 FMA; Zen 4's
    AVX-512 on 256-bit pipes counts as AVX2; no x86 flags: no row, and why."""
    assert fp32_flops_per_cycle(parse_cpuinfo(INTEL)) == (64, "avx512f")
    assert fp32_flops_per_cycle(parse_cpuinfo(AMD)) == (32, "fma")
    zen4 = AMD.replace("fma cx16", "fma avx512f cx16")
    assert fp32_flops_per_cycle(parse_cpuinfo(zen4))[0] == 32
    flops, why = fp32_flops_per_cycle({"Features": "fp asimd"})
    assert flops is None and "no x86 vector flags" in why


def test_the_peak_clock_prefers_cpufreq_and_says_where_it_came_from() -> None:
    fields = parse_cpuinfo(INTEL)
    assert peak_clock_mhz(fields, 3800.0) == (3800.0, "cpufreq maximum")
    clock, source = peak_clock_mhz(fields, None)
    assert clock == 2000.0 and "/proc/cpuinfo" in source
    assert peak_clock_mhz({}, None)[0] is None


def test_the_peak_is_cores_times_clock_times_flops_or_says_why_not() -> None:
    host = {"cpu_fp32_flops_per_cycle": 32, "cpu_fp32_flops_per_cycle_from": "fma",
            "cpu_peak_clock_mhz": 2500.0, "cpu_peak_clock_from": "cpufreq maximum"}
    peak, how = fp32_peak_gflops(host, 2)
    assert peak == 160.0 and how.startswith("2 cores x 2500.0 MHz x 32 FP32 FLOPs/cycle")
    peak, how = fp32_peak_gflops({**host, "cpu_fp32_flops_per_cycle": None,
                                  "cpu_fp32_flops_per_cycle_from": "no x86 vector flags"}, 2)
    assert peak is None and how == "no peak: no x86 vector flags"


