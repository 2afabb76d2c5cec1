"""Hardware and software fingerprint of the machine a run measures on.

Collected without importing any deep-learning framework: installed versions come from
package metadata. Build details (BLAS, oneDNN, OpenMP, CUDA) are each backend's to read
(``mlflow_dlaas.backends.builds``), added where a framework is imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from mlflow_dlaas.hardware import cpu_info, host_hash, nvidia_gpu_models
from mlflow_dlaas.redaction import SECRET_NAME, redact_value
from mlflow_dlaas.runs.schema import ENV_TAG_PREFIX, HOST_TAG

TAG_VALUE_LIMIT = 500
#: The fingerprint's entries that are tags of their own: what runs are grouped and filtered
#: by. The versions are one tag (``dlaas.env.versions``), the performance variables another
#: (``dlaas.env.variables``); the rest (cores, OS, flags, microcode, builds ...) is in the
#: run's ``environment/fingerprint.json``, so that a run's overview shows its answer before
#: its tags (MLflow's run page lists every tag above the description in a narrow window).
IDENTITY_KEYS = ("cpu_model", "gpu_models")
#: The tag of every version the fingerprint holds: ``python 3.11.7, torch 2.13.0, ...``.
VERSIONS_TAG = "versions"
#: The tag of the performance variables set: ``OMP_NUM_THREADS=1, KMP_BLOCKTIME=0``.
VARIABLES_TAG = "variables"
#: The artifact folder where a measured run keeps its whole fingerprint (fingerprint.json).
FINGERPRINT_DIR = "environment"

#: Prefixes and names of environment variables that shape performance, and only those.
ENV_ALLOW_PREFIXES = (
    "OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS_", "BLIS_", "VECLIB_", "NUMEXPR_",
    "TF_", "MXNET_", "ORT_", "OV_", "TORCH_", "PYTORCH_", "CUDA_", "CUDNN_", "NCCL_",
    "NVIDIA_", "DNNL_", "ONEDNN_", "XLA_",
)
#: Terraform also uses TF_ (TF_VAR_* carries its variables, often credentials): never those.
ENV_DENY_PREFIXES = ("TF_VAR_", "TF_CLI_", "TF_TOKEN_", "TF_HTTP_", "TF_REGISTRY_")
#: The variables whose values are recorded (credentials removed even so): the thread,
#: affinity, allocator and library switches that shape a measurement. Any other variable of
#: the prefixes above is recorded by name only, as :data:`NOT_RECORDED`: a value nobody
#: vetted may carry anything (``OMP_ARG=user:pw@host``, ``KMP_EXTRA='--passwd pw'``).
ENV_VALUES_RECORDED = frozenset({
    "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OMP_WAIT_POLICY", "OMP_DYNAMIC",
    "OMP_SCHEDULE", "OMP_MAX_ACTIVE_LEVELS", "OMP_STACKSIZE", "OMP_THREAD_LIMIT",
    "MKL_NUM_THREADS", "MKL_DYNAMIC", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR",
    "MKL_THREADING_LAYER", "MKL_DEBUG_CPU_TYPE", "KMP_AFFINITY", "KMP_BLOCKTIME",
    "KMP_SETTINGS", "KMP_HW_SUBSET", "KMP_TPAUSE", "KMP_DUPLICATE_LIB_OK", "KMP_LIBRARY",
    "GOMP_SPINCOUNT", "GOMP_CPU_AFFINITY", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE", "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
    "NUMEXPR_MAX_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
    "TF_ENABLE_ONEDNN_OPTS", "TF_XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL", "TF_GPU_ALLOCATOR",
    "TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_THREAD_MODE", "TF_ENABLE_XLA",
    "MXNET_ENGINE_TYPE", "MXNET_CPU_WORKER_NTHREADS", "MXNET_OMP_MAX_THREADS",
    "MXNET_SUBGRAPH_BACKEND", "MXNET_CUDNN_AUTOTUNE_DEFAULT", "TORCH_NUM_THREADS",
    "TORCHINDUCTOR_FREEZING", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_JIT", "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING", "CUDNN_LOGINFO_DBG",
    "NCCL_DEBUG", "NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NVIDIA_TF32_OVERRIDE",
    "DNNL_VERBOSE", "DNNL_MAX_CPU_ISA", "DNNL_DEFAULT_FPMATH_MODE", "ONEDNN_VERBOSE",
    "ONEDNN_MAX_CPU_ISA", "ONEDNN_DEFAULT_FPMATH_MODE", "XLA_FLAGS", "LD_PRELOAD",
})
NOT_RECORDED = "(set; value not recorded)"

FRAMEWORK_DISTRIBUTIONS = {
    "torch": ("torch",),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu"),
    "keras": ("keras",),
    "mxnet": ("mxnet", "mxnet-cu112", "mxnet-mkl"),
    "onnxruntime": ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino"),
    "onnx": ("onnx",),
    "openvino": ("openvino",),
    "numpy": ("numpy",),
    "mlflow": ("mlflow",),
    "optuna": ("optuna",),
}


def performance_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed, secret-free environment variables that affect performance: those of
    :data:`ENV_VALUES_RECORDED` with their values, credentials removed; the rest by name."""
    environ = os.environ if environ is None else environ
    return {
        name: redact_value(value) if name in ENV_VALUES_RECORDED else NOT_RECORDED
        for name, value in sorted(environ.items())
        if (name.startswith(ENV_ALLOW_PREFIXES) or name == "LD_PRELOAD")
        and not name.startswith(ENV_DENY_PREFIXES)
        and not SECRET_NAME.search(name)
    }


def installed_versions() -> dict[str, str]:
    """Installed version of each known framework, from package metadata (no import)."""
    versions = {}
    for name, distributions in FRAMEWORK_DISTRIBUTIONS.items():
        for dist in distributions:
            try:
                versions[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return versions


def os_info() -> dict[str, Any]:
    """Operating system, kernel and Python."""
    return {
        "os": platform.system(),
        "os_release": _os_release(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
    }


def gpu_info() -> dict[str, Any]:
    """GPU model, count and driver through NVML; ``gpu_count`` 0 where there is none."""
    try:
        import pynvml
    except ImportError:
        return {"gpu_count": 0, "gpu_status": "nvidia-ml-py not installed (extra: nvidia)"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return {"gpu_count": 0, "gpu_status": f"no NVIDIA GPU ({e})"}
    try:
        count = pynvml.nvmlDeviceGetCount()
        names = [
            _decode(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)))
            for i in range(count)
        ]
        info = {
            "gpu_count": count,
            "gpu_models": ", ".join(names),
            "gpu_driver": _decode(pynvml.nvmlSystemGetDriverVersion()),
        }
        try:
            cuda = pynvml.nvmlSystemGetCudaDriverVersion()
            info["gpu_cuda_driver"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except pynvml.NVMLError:
            pass
        return info
    except pynvml.NVMLError as e:
        return {"gpu_count": 0, "gpu_status": f"NVML error: {e}"}
    finally:
        pynvml.nvmlShutdown()


def threadpools() -> dict[str, Any]:
    """BLAS and OpenMP libraries loaded in this process, with the thread counts in force."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {}
    info = {}
    for pool in threadpool_info():
        name = f"{pool.get('user_api')}_{pool.get('internal_api')}"
        info[f"threadpool_{name}"] = (
            f"{pool.get('version')} threads={pool.get('num_threads')} "
            f"({Path(pool.get('filepath', '')).name})"
        )
    return info


def fingerprint() -> dict[str, Any]:
    """The machine's fingerprint as a flat mapping of name to value (frameworks' builds
    apart: :func:`mlflow_dlaas.backends.builds.framework_builds`)."""
    data: dict[str, Any] = {}
    data.update(cpu_info())
    data.update(os_info())
    data.update({f"{k}_version": v for k, v in installed_versions().items()})
    data.update(gpu_info())
    data["host_hash"] = host_hash(data, nvidia_gpu_models())
    data.update(threadpools())
    data.update({f"env_{k}": v for k, v in performance_env().items()})
    return data


#: What tells two hosts of a fleet apart (:func:`host_class`): the CPU, the cores this
#: process may use, the ISA, the memory and the libraries' versions.
HOST_CLASS_KEYS = ("cpu_model", "cpu_affinity_cores", "cpu_flags")
#: a host class as a user names it (``c7i.large``): what a study name and a tag can hold
HOST_CLASS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def host_class(data: Mapping[str, Any]) -> str:
    """A fleet's name for this kind of host, from its fingerprint: ``amd-epyc-2c-1a2b3c``
    (vendor and line, cores allowed, 6 hex of SHA-256 over :data:`HOST_CLASS_KEYS`, the
    memory in whole GiB and every installed version)."""
    identity = {key: data.get(key) for key in HOST_CLASS_KEYS}
    identity["memory_gib"] = round((data.get("memory_total_bytes") or 0) / 2**30)
    identity["versions"] = {k: v for k, v in data.items() if k.endswith("_version")}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode())
    words = re.findall(r"[a-z0-9]+", str(data.get("cpu_model") or "cpu").lower())
    line = "-".join(w for w in words[:3] if w not in ("r", "tm", "cpu", "processor"))
    return f"{line or 'cpu'}-{data.get('cpu_affinity_cores') or 1}c-{digest.hexdigest()[:6]}"


def this_host() -> str:
    """This machine's hardware hash (``dlaas.host`` of the runs it measures)."""
    return str(fingerprint()["host_hash"])


def as_tags(data: Mapping[str, Any]) -> dict[str, str]:
    """The fingerprint's identifying entries as MLflow tags (``dlaas.env.cpu_model``, the
    GPU models where any, ``dlaas.env.versions``, ``dlaas.env.variables``; long values cut
    short), and the host hash as ``dlaas.host``."""
    tags = {ENV_TAG_PREFIX + key: str(data[key])[:TAG_VALUE_LIMIT]
            for key in IDENTITY_KEYS if data.get(key)}
    versions = [f"python {data['python']}"] if data.get("python") else []
    versions += [f"{key.removesuffix('_version')} {value}" for key, value in data.items()
                 if key.endswith("_version") and value]
    if versions:
        tags[ENV_TAG_PREFIX + VERSIONS_TAG] = ", ".join(versions)[:TAG_VALUE_LIMIT]
    variables = [f"{key.removeprefix('env_')}={value}" for key, value in data.items()
                 if key.startswith("env_")]
    if variables:
        tags[ENV_TAG_PREFIX + VARIABLES_TAG] = ", ".join(variables)[:TAG_VALUE_LIMIT]
    if data.get("host_hash"):
        tags[HOST_TAG] = data["host_hash"]
    return tags


def version_in(tags: Mapping[str, str], package: str) -> str:
    """``package``'s version as a run's ``dlaas.env.versions`` tag records it, or ''."""
    for entry in tags.get(ENV_TAG_PREFIX + VERSIONS_TAG, "").split(", "):
        name, _, version = entry.partition(" ")
        if name == package:
            return version
    return ""


def write_fingerprint(directory: Path, data: Mapping[str, Any]) -> Path:
    """``data`` as ``directory/fingerprint.json`` (for the run's ``environment/`` artifact)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fingerprint.json").write_text(json.dumps(data, indent=2, default=str))
    return directory


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _os_release() -> str:
    text = _read_text("/etc/os-release") or ""
    found = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', text, re.M)
    return found.group(1) if found else platform.platform()


def _decode(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
