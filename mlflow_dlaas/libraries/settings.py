"""Library settings: their valid values, the files they load, and the worker's environment.

``openmp_runtime`` and ``allocator`` are switched by ``LD_PRELOAD``: a preloaded library comes
first in the process's global symbol scope, so it serves the OpenMP or ``malloc`` entry
points of every library loaded after it (the framework's own OpenMP may stay mapped, unused).
The thread policies are the variables the OpenMP runtimes read when they start.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from pathlib import Path
from typing import Protocol

from mlflow_dlaas.errors import ConfigError


class LibraryChoices(Protocol):
    """The library settings a process asks for (``ParallelismSettings`` carries them)."""

    openmp_runtime: str
    allocator: str
    onednn: str
    omp_proc_bind: str
    omp_places: str
    omp_wait_policy: str
    kmp_affinity: str
    kmp_blocktime: str

OPENMP_RUNTIMES = ("default", "gnu", "intel")
ALLOCATORS = ("default", "jemalloc", "tcmalloc")
ONEDNN = ("default", "on", "off")
#: Values of OMP_PROC_BIND (a comma list gives one per nesting level).
PROC_BIND = ("true", "false", "primary", "master", "close", "spread")
WAIT_POLICIES = ("active", "passive")
#: KMP_AFFINITY's words (Intel's OpenMP); numbers (permute, offset) are allowed too.
KMP_AFFINITY_WORDS = ("none", "compact", "scatter", "balanced", "disabled", "logical",
                      "physical", "verbose", "noverbose", "warnings", "nowarnings", "respect",
                      "norespect", "duplicates", "noduplicates")
KMP_GRANULARITY = ("fine", "thread", "core", "tile", "socket", "die")
_PLACES = re.compile(r"(threads|cores|sockets|ll_caches|numa_domains)(\(\d+\))?"
                     r"|\{\d+(:\d+(:\d+)?)?(,\d+)*\}(,\{\d+(:\d+(:\d+)?)?(,\d+)*\})*")

#: The string-valued library settings (given and logged as flat params); '' or 'default'
#: keeps what the framework does on its own.
LIBRARY_SETTINGS = ("openmp_runtime", "allocator", "onednn", "omp_proc_bind", "omp_places",
                    "omp_wait_policy", "kmp_affinity", "kmp_blocktime")
#: The environment variable each thread policy sets.
POLICY_VARIABLES = {"omp_proc_bind": "OMP_PROC_BIND", "omp_places": "OMP_PLACES",
                    "omp_wait_policy": "OMP_WAIT_POLICY", "kmp_affinity": "KMP_AFFINITY",
                    "kmp_blocktime": "KMP_BLOCKTIME"}
#: Policies only Intel's OpenMP reads (GNU libgomp ignores them).
INTEL_ONLY = ("kmp_affinity", "kmp_blocktime")

#: The shared library each choice preloads, and where it comes from.
LIBRARY_FILES = {
    ("openmp_runtime", "gnu"): ("libgomp.so.1", "the system's GNU OpenMP (Debian's libgomp1)"),
    ("openmp_runtime", "intel"): ("libiomp5.so", "Intel's OpenMP (the intel-openmp wheel: "
                                  "pip install 'mlflow-dlaas[libraries]', part of make install)"),
    ("allocator", "jemalloc"): ("libjemalloc.so.2", "Debian's libjemalloc2 (make libraries)"),
    ("allocator", "tcmalloc"): ("libtcmalloc_minimal.so.4",
                                "Debian's libtcmalloc-minimal4 (make libraries)"),
}


def check_library_settings(settings: LibraryChoices) -> None:
    """Raise ConfigError naming the first invalid library setting and its valid values."""
    for name, valid in (("openmp_runtime", OPENMP_RUNTIMES), ("allocator", ALLOCATORS),
                        ("onednn", ONEDNN), ("omp_wait_policy", ("", *WAIT_POLICIES))):
        if getattr(settings, name) not in valid:
            shown = ", ".join(v or "''" for v in valid)
            raise ConfigError(f"{name} must be one of {shown}, got {getattr(settings, name)!r}")
    bind = settings.omp_proc_bind
    if bind and not all(part in PROC_BIND for part in bind.split(",")):
        raise ConfigError(f"omp_proc_bind must be one of {', '.join(PROC_BIND)} (or a comma "
                          f"list, one per nesting level), got {bind!r}")
    if settings.omp_places and not _PLACES.fullmatch(settings.omp_places):
        raise ConfigError("omp_places must be threads, cores, sockets, ll_caches or "
                          f"numa_domains (optionally with a count: cores(2)) or a place list "
                          f"like {{0}},{{1}}; got {settings.omp_places!r}")
    for word in filter(None, settings.kmp_affinity.split(",")):
        if not (word in KMP_AFFINITY_WORDS or word.isdigit() or word in (
                f"granularity={g}" for g in KMP_GRANULARITY)):
            raise ConfigError(f"kmp_affinity: {word!r} is not one of Intel's KMP_AFFINITY words "
                              f"({', '.join(KMP_AFFINITY_WORDS)}, granularity=fine|core|..., "
                              "permute and offset numbers); for core lists use cpu_affinity")
    blocktime = settings.kmp_blocktime
    if blocktime and not (blocktime.isdigit() or blocktime == "infinite"):
        raise ConfigError(f"kmp_blocktime must be milliseconds (an integer >= 0) or 'infinite', "
                          f"got {blocktime!r}")
    if settings.openmp_runtime == "gnu":
        given = intel_only_given(settings)
        if given:
            raise ConfigError(f"{', '.join(given)}: read by Intel's OpenMP only; GNU libgomp "
                              "ignores them: use openmp_runtime=intel, or omp_proc_bind / "
                              "omp_places / omp_wait_policy")


def intel_only_given(settings: LibraryChoices) -> list[str]:
    """The Intel-only policies ``settings`` gives."""
    return [name for name in INTEL_ONLY if getattr(settings, name)]


def openmp_given(settings: LibraryChoices) -> list[str]:
    """The OpenMP settings ``settings`` gives: the runtime and its thread policies."""
    return [name for name in ("openmp_runtime", *POLICY_VARIABLES)
            if getattr(settings, name) not in ("", "default")]


def refuse_unusable(settings: LibraryChoices, runtime: str, *, openmp: str,
                    onednn: str) -> None:
    """ConfigError for the OpenMP settings and ``onednn`` of a runtime that has no use for
    them; ``openmp`` and ``onednn`` say why (the runtime's facts)."""
    given = openmp_given(settings)
    if given:
        raise ConfigError(f"{', '.join(given)}: {openmp}, so there is nothing to switch; "
                          f"leave them unset for {runtime}, use intra_op_threads / "
                          "inter_op_threads")
    if settings.onednn != "default":
        raise ConfigError(f"onednn={settings.onednn}: {onednn}, so there is nothing to "
                          f"switch; leave onednn unset for {runtime}")


def policies_given(settings: LibraryChoices) -> list[str]:
    """The OpenMP thread policies ``settings`` gives."""
    return [name for name in POLICY_VARIABLES if getattr(settings, name)]


def library_file(setting: str, choice: str) -> Path:
    """The shared library that ``setting=choice`` preloads; ConfigError saying how to install
    it where it is not found."""
    name, origin = LIBRARY_FILES[(setting, choice)]
    for folder in _search_folders(setting, choice):
        path = folder / name
        if path.is_file():
            return path
    raise ConfigError(f"{setting}={choice} needs {name}, {origin}, which is not installed "
                      f"here (looked in {', '.join(map(str, _search_folders(setting, choice)))})")


def _search_folders(setting: str, choice: str) -> list[Path]:
    if (setting, choice) == ("openmp_runtime", "intel"):
        return [Path(sys.prefix) / "lib"]  # where the intel-openmp wheel puts libiomp5
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    multiarch = [f"/usr/lib/{arch}", f"/lib/{arch}"] if arch else []
    return [Path(p) for p in (*multiarch, "/usr/lib64", "/usr/lib")]


def preloads(settings: LibraryChoices) -> list[Path]:
    """The libraries ``settings`` preloads, OpenMP first."""
    chosen = [("openmp_runtime", settings.openmp_runtime), ("allocator", settings.allocator)]
    return [library_file(s, c) for s, c in chosen if c != "default"]


def library_environment(settings: LibraryChoices) -> dict[str, str]:
    """``LD_PRELOAD`` (ours before any the user set) and the thread policies' variables."""
    env = {POLICY_VARIABLES[name]: getattr(settings, name) for name in policies_given(settings)}
    files = [str(p) for p in preloads(settings)]
    if files:
        env["LD_PRELOAD"] = ":".join([*files, *filter(None, [os.environ.get("LD_PRELOAD")])])
    return env


def installed_choices(wanted: dict[str, str]) -> dict[str, list[str]]:
    """``{setting: ['default', choice]}`` for each ``setting: choice`` of ``wanted`` whose
    library is installed here (a study searches only what can run)."""
    found = {}
    for setting, choice in wanted.items():
        try:
            library_file(setting, choice)
        except ConfigError:
            continue
        found[setting] = ["default", choice]
    return found
