"""What the measured process itself shows: which parallel libraries are mapped, which file
serves the OpenMP and allocator entry points, the OpenMP runtime's own answers, and whether
every requested library setting is in force.

Mapped is not in force: with Intel's OpenMP preloaded, PyTorch's own libgomp stays mapped but
unused. So each entry point is resolved as the dynamic loader binds it (the global scope
first, where preloaded libraries come first; then the framework library's own dependencies)
and ``dladdr`` names the file that defines it. Runs inside the measured worker, after the
framework is loaded and configured.
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mlflow_dlaas.errors import WorkloadError
from mlflow_dlaas.libraries.settings import POLICY_VARIABLES, LibraryChoices, library_file
from mlflow_dlaas.runs.schema import MAPPED_TAG

#: (symbol, version) the frameworks bind for OpenMP: GCC's current and old parallel-region
#: calls and the API's thread count.
OPENMP_ENTRY_POINTS = (("GOMP_parallel", "GOMP_4.0"), ("GOMP_parallel_start", "GOMP_1.0"),
                       ("omp_get_max_threads", "OMP_1.0"))
ALLOCATOR_ENTRY_POINTS = ("malloc", "free")
#: Basenames of the parallel libraries worth listing from /proc/self/maps.
PARALLEL_LIBRARY = re.compile(
    r"lib(gomp|iomp5|omp|jemalloc|tcmalloc|mkl|dnnl|mkldnn|blis|tbb|\w*openblas)[\w.+-]*\.so[\d.]*")
#: omp_get_proc_bind()'s answer per OMP_PROC_BIND value (5: Intel's KMP_AFFINITY binding).
PROC_BIND_CODES = {"false": 0, "primary": 2, "master": 2, "close": 3, "spread": 4}
INTEL_BINDING = 5
KMP_AFFINITY_BINDS = ("compact", "scatter", "balanced", "explicit")
INFINITE_BLOCKTIME = 2**31 - 1
ARTIFACT_DIR, ARTIFACT_FILE = "libraries", "readback.json"


class LibraryNotInForce(WorkloadError):
    """A requested library setting is not what the measured process shows."""


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _libdl() -> ctypes.CDLL:
    lib = ctypes.CDLL(None)
    lib.dlsym.restype = lib.dlvsym.restype = lib.dlopen.restype = ctypes.c_void_p
    lib.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.dlvsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.dlclose.argtypes = [ctypes.c_void_p]
    lib.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    return lib


def mapped_files(pid: int | str = "self") -> list[str]:
    """Every file mapped into process ``pid`` (default: this one), from /proc/PID/maps, in
    load order."""
    seen: dict[str, None] = {}
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/"):
                seen.setdefault(parts[5].strip(), None)
    return list(seen)


def parallel_libraries(mapped: list[str]) -> list[str]:
    """The OpenMP, allocator, BLAS and oneDNN libraries among ``mapped``."""
    return [p for p in mapped if PARALLEL_LIBRARY.fullmatch(os.path.basename(p))]


class _Resolver:
    """Where the dynamic loader binds a symbol, and the defining file."""

    def __init__(self, consumer: str | None) -> None:
        self.dl = _libdl()
        self.consumer = consumer

    def address(self, symbol: str, version: str | None = None) -> int | None:
        name = symbol.encode()
        found = self._lookup(None, name, version)  # the global scope: preloads first
        if not found and self.consumer:  # then the framework library's own dependencies
            handle = self.dl.dlopen(self.consumer.encode(), os.RTLD_LAZY | os.RTLD_NOLOAD)
            if handle:
                found = self._lookup(handle, name, version)
                self.dl.dlclose(handle)
        return found or None

    def _lookup(self, handle: int | None, name: bytes, version: str | None) -> int | None:
        if version:
            return self.dl.dlvsym(handle, name, version.encode())
        return self.dl.dlsym(handle, name)

    def file_of(self, address: int | None) -> str | None:
        if not address:
            return None
        info = _DlInfo()
        if not self.dl.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
            return None
        return os.path.realpath(info.dli_fname.decode())

    def call_int(self, library: str, symbol: str) -> int | None:
        """``int symbol(void)`` of ``library`` (already loaded), or None where it lacks it."""
        handle = self.dl.dlopen(library.encode(), os.RTLD_LAZY | os.RTLD_NOLOAD)
        if not handle:
            return None
        try:
            address = self.dl.dlsym(handle, symbol.encode())
            return int(ctypes.CFUNCTYPE(ctypes.c_int)(address)()) if address else None
        finally:
            self.dl.dlclose(handle)


@dataclass(frozen=True)
class LibraryReadback:
    """What this process shows; file paths are real paths."""

    mapped: list[str]
    openmp_served_by: dict[str, str | None]
    allocator_served_by: dict[str, str | None]
    openmp: dict[str, int | None] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    framework: dict[str, Any] = field(default_factory=dict)
    threadpools: list[dict[str, Any]] = field(default_factory=list)

    @property
    def openmp_file(self) -> str | None:
        """The file serving the OpenMP entry points (the first one found)."""
        return next((f for f in self.openmp_served_by.values() if f), None)

    def params(self) -> dict[str, str]:
        """``in_force_*`` params: the library serving each kind, policies, oneDNN."""
        openmp, malloc = self.openmp_file, self.allocator_served_by.get("malloc")
        params = {"in_force_openmp_runtime": _describe(openmp, _openmp_kind),
                  "in_force_allocator": _describe(malloc, _allocator_kind)}
        bind = self.openmp.get("proc_bind")
        if bind is not None:
            params["in_force_omp_proc_bind"] = _proc_bind_name(bind)
        if self.openmp.get("num_places") is not None:
            params["in_force_omp_num_places"] = str(self.openmp["num_places"])
        if self.openmp.get("kmp_blocktime_ms") is not None:
            blocktime = self.openmp["kmp_blocktime_ms"]
            params["in_force_kmp_blocktime"] = ("infinite" if blocktime == INFINITE_BLOCKTIME
                                                else str(blocktime))
        if "onednn" in self.framework:
            params["in_force_onednn"] = str(self.framework["onednn"])
        return params

    def tags(self) -> dict[str, str]:
        return {MAPPED_TAG: ", ".join(os.path.basename(p) for p in self.mapped) or "none"}


def read_back(consumer_name: str = "", framework: Mapping[str, Any] | None = None
              ) -> LibraryReadback:
    """Read this process: ``consumer_name`` is the framework's native library (a basename
    prefix such as ``libtorch_cpu``) whose own dependencies serve what the global scope does
    not; ``framework`` the framework's own report (oneDNN state, build reports)."""
    everything = mapped_files()
    consumer = next((p for p in everything if consumer_name
                     and os.path.basename(p).startswith(consumer_name)), None)
    resolver = _Resolver(consumer)
    openmp_by = {s: resolver.file_of(resolver.address(s, v)) for s, v in OPENMP_ENTRY_POINTS}
    alloc_by = {s: resolver.file_of(resolver.address(s)) for s in ALLOCATOR_ENTRY_POINTS}
    openmp_file = next((f for f in openmp_by.values() if f), None)
    state: dict[str, int | None] = {}
    if openmp_file:
        state = {"max_threads": resolver.call_int(openmp_file, "omp_get_max_threads"),
                 "proc_bind": resolver.call_int(openmp_file, "omp_get_proc_bind"),
                 "num_places": resolver.call_int(openmp_file, "omp_get_num_places"),
                 "kmp_blocktime_ms": resolver.call_int(openmp_file, "kmp_get_blocktime")}
    variables = ("LD_PRELOAD", "OMP_NUM_THREADS", *POLICY_VARIABLES.values(),
                 "TF_ENABLE_ONEDNN_OPTS", "MXNET_MKLDNN_ENABLED")
    return LibraryReadback(
        mapped=[os.path.realpath(p) for p in parallel_libraries(everything)],
        openmp_served_by=openmp_by, allocator_served_by=alloc_by, openmp=state,
        environment={v: os.environ[v] for v in variables if v in os.environ},
        framework=dict(framework or {}), threadpools=_threadpools())


def _threadpools() -> list[dict[str, Any]]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [dict(pool) for pool in threadpool_info()]


def _openmp_kind(name: str) -> str:
    return ("intel" if "iomp5" in name else "gnu" if "gomp" in name
            else "llvm" if name.startswith("libomp") else "other")


def _allocator_kind(name: str) -> str:
    return ("jemalloc" if "jemalloc" in name else "tcmalloc" if "tcmalloc" in name
            else "glibc" if name.startswith("libc.") else "other")


def _describe(path: str | None, kind: Any) -> str:
    if path is None:
        return "none"
    name = os.path.basename(path)
    return f"{kind(name)} ({name})"


def _proc_bind_name(code: int) -> str:
    names = {0: "false", 1: "true", 2: "primary", 3: "close", 4: "spread", 5: "intel"}
    return names.get(code, str(code))


def problems(settings: LibraryChoices, found: LibraryReadback, framework: str
             ) -> list[str]:
    """One line per requested library setting that ``found`` does not show in force."""
    issues: list[str] = []
    for setting, served in (("openmp_runtime", found.openmp_served_by),
                            ("allocator", found.allocator_served_by)):
        choice = getattr(settings, setting)
        if choice == "default":
            continue
        wanted = os.path.realpath(library_file(setting, choice))
        wrong = {s: f for s, f in served.items() if f and f != wanted}
        if not any(served.values()):
            issues.append(f"{setting}={choice}: no {setting.split('_')[0]} entry point is "
                          f"served in this {framework} process")
        elif wrong:
            issues.append(f"{setting}={choice} preloaded {wanted}, but "
                          + ", ".join(f"{s} is served by {f}" for s, f in wrong.items()))
    if settings.onednn != "default":
        state = found.framework.get("onednn")
        if state is None:
            issues.append(f"onednn={settings.onednn}: {framework} reports no oneDNN state here")
        elif state != settings.onednn:
            issues.append(f"onednn={settings.onednn} was asked, but {framework} reports "
                          f"oneDNN {state}")
    issues += _policy_problems(settings, found, framework)
    return issues


def _policy_problems(settings: LibraryChoices, found: LibraryReadback, framework: str
                     ) -> list[str]:
    given = [name for name in POLICY_VARIABLES if getattr(settings, name)]
    if not given:
        return []
    openmp = found.openmp_file
    if openmp is None:
        return [f"{', '.join(given)}: no OpenMP runtime serves this {framework} process, so "
                "nothing reads them"]
    issues = []
    name = os.path.basename(openmp)
    intel = _openmp_kind(name) == "intel"
    for setting in ("kmp_affinity", "kmp_blocktime"):
        if getattr(settings, setting) and not intel:
            issues.append(f"{setting} is read by Intel's OpenMP only, but the OpenMP entry "
                          f"points are served by {name}: set openmp_runtime=intel")
    bind = found.openmp.get("proc_bind")
    if settings.omp_proc_bind and bind is not None:
        first = settings.omp_proc_bind.split(",")[0]
        ok = bind != 0 if first == "true" else bind == PROC_BIND_CODES[first]
        if not ok:
            issues.append(f"omp_proc_bind={settings.omp_proc_bind}, but {name} reports "
                          f"binding {_proc_bind_name(bind)}")
    if settings.omp_places and not found.openmp.get("num_places"):
        issues.append(f"omp_places={settings.omp_places}, but {name} reports no places")
    if (intel and not settings.omp_proc_bind and bind != INTEL_BINDING
            and any(w in KMP_AFFINITY_BINDS for w in settings.kmp_affinity.split(","))):
        issues.append(f"kmp_affinity={settings.kmp_affinity}, but {name} reports binding "
                      f"{_proc_bind_name(bind or 0)}, not Intel's affinity")
    blocktime = found.openmp.get("kmp_blocktime_ms")
    if intel and settings.kmp_blocktime and blocktime is not None:
        wanted = (INFINITE_BLOCKTIME if settings.kmp_blocktime == "infinite"
                  else int(settings.kmp_blocktime))
        if blocktime != wanted:
            issues.append(f"kmp_blocktime={settings.kmp_blocktime}, but {name} reports "
                          f"{blocktime} ms")
    if settings.omp_wait_policy and os.environ.get("OMP_WAIT_POLICY") != settings.omp_wait_policy:
        issues.append(f"omp_wait_policy={settings.omp_wait_policy}, but this process has "
                      f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}")
    return issues
