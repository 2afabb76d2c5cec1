"""The machine's measured ceilings, which a run's achieved GFLOP/s is held against: a matrix
product per precision (PyTorch's CPU kernels, oneDNN and MKL, as the frameworks run them;
numpy's BLAS for fp32 where PyTorch is absent) and the memory bandwidth (a STREAM-style
triad), on the cores a run uses.

A nominal peak (cores x clock x FLOPs per cycle) is wrong on a virtual machine whose cores
run above the clock it reports; a measured one holds every run. It is measured once per host
and core count, in a process of its own pinned like the run (``python -m
mlflow_dlaas.ceilings --cores N``, a few seconds), and cached (``MLFLOW_DLAAS_CACHE``, default
``~/.cache/mlflow-dlaas``), each figure's best of the calibrations kept; one that other work
disturbed (its threads got less than the cores) is measured again ten minutes later.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mlflow_dlaas.environment import fingerprint
from mlflow_dlaas.hardware import assumed_flags_key, emulated_bf16_reason

CACHE_ENV = "MLFLOW_DLAAS_CACHE"
#: The precisions with a measured ceiling: bf16 only on a CPU with native bf16 (emulated,
#: it is no ceiling); int8 has none (PyTorch's CPU int8 product is not the VNNI kernels the
#: runtimes' int8 paths use).
PRECISIONS = ("fp32", "bf16")
GEMM_SIZE = 2048
#: Each figure is the best of this many timings (a ceiling is what the machine can do).
REPEATS = 5
TRIAD_ELEMENTS = 1 << 23  # 64 MiB per float64 array: well past the last-level cache
#: A calibration whose threads got less than this share of its cores was disturbed.
UNDISTURBED_SHARE = 0.85
CALIBRATION_TIMEOUT_S = 120
#: Disturbed ceilings are kept (a busy machine would otherwise measure before every run)
#: and measured again after this long.
RETRY_DISTURBED_S = 600


@dataclass(frozen=True)
class Ceilings:
    """Measured on ``cores`` cores: GFLOP/s per precision, memory bandwidth in GB/s."""

    cores: int
    gflops: dict[str, float] = field(default_factory=dict)
    bandwidth_gb_per_s: float | None = None
    how: str = ""
    disturbed: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Ceilings:
        return cls(**json.loads(text))


def peak_for(precision: str, ceilings: Ceilings | None, nominal_gflops: float | None
             ) -> tuple[float | None, str]:
    """(the peak a run at ``precision`` is held against, how it was found): the measured
    ceiling of its precision, else (fp32 only) the nominal peak, else None with why."""
    if ceilings is not None and ceilings.gflops.get(precision):
        return ceilings.gflops[precision], (
            f"measured {precision} ceiling of {ceilings.cores} core(s): "
            f"{ceilings.gflops[precision]:.1f} GFLOP/s ({ceilings.how})")
    if precision == "fp32" and nominal_gflops:
        return nominal_gflops, f"nominal fp32 peak {nominal_gflops:.1f} GFLOP/s (not measured)"
    return None, f"no peak: no measured {precision} ceiling here"


def cached_ceilings(cores: int, affinity: Sequence[int] | None = None, *,
                    fresh: bool = False) -> Ceilings | None:
    """This host's ceilings on ``cores`` cores: from the cache, else measured now in a
    process of its own pinned to ``affinity``. Measured again where ``fresh`` (a run beat
    them) or where the kept ones were disturbed and are older than
    :data:`RETRY_DISTURBED_S`; the cache keeps each precision's best. None where no
    calibration ever succeeded."""
    path = _cache_dir() / f"{fingerprint()['host_hash']}-{cores}c{assumed_flags_key()}.json"
    kept = _read(path)
    if kept is not None and not fresh and not _lacks_what_this_can_measure(kept) and (
            not kept.disturbed or time.time() - path.stat().st_mtime < RETRY_DISTURBED_S):
        return kept
    measured = _calibrate(cores, affinity)
    if measured is None:
        return kept
    best = measured if kept is None else _best_of(kept, measured)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(best.to_json())
    partial.replace(path)
    return best


def _lacks_what_this_can_measure(kept: Ceilings) -> bool:
    """Whether ``kept`` has no bf16 ceiling where this CPU has native bf16 and this
    environment has PyTorch to measure it (one without, MXNet's, kept fp32 alone)."""
    return ("bf16" not in kept.gflops and not emulated_bf16_reason()
            and importlib.util.find_spec("torch") is not None)


def _read(path: Path) -> Ceilings | None:
    try:
        return Ceilings.from_json(path.read_text())
    except FileNotFoundError:
        return None
    except (ValueError, TypeError):
        path.unlink(missing_ok=True)  # a damaged cache is measured again
        return None


def _calibrate(cores: int, affinity: Sequence[int] | None) -> Ceilings | None:
    """:func:`measure` in a process of its own, pinned to ``affinity``."""
    command = [sys.executable, "-m", "mlflow_dlaas.ceilings", "--cores", str(cores)]
    pinned: Callable[[], None] | None = (
        (lambda: os.sched_setaffinity(0, set(affinity))) if affinity else None)
    try:
        done = subprocess.run(command, capture_output=True, text=True, preexec_fn=pinned,
                              timeout=CALIBRATION_TIMEOUT_S)
        return Ceilings.from_json(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, TypeError, IndexError, OSError):
        return None


def _best_of(kept: Ceilings, measured: Ceilings) -> Ceilings:
    """Each figure's best of two calibrations: a ceiling is what the machine can do."""
    gflops = {p: max(kept.gflops.get(p, 0.0), measured.gflops.get(p, 0.0))
              for p in {*kept.gflops, *measured.gflops}}
    bandwidth = max(kept.bandwidth_gb_per_s or 0.0, measured.bandwidth_gb_per_s or 0.0)
    newer = measured.gflops.get("fp32", 0.0) >= kept.gflops.get("fp32", 0.0)
    return Ceilings(measured.cores, gflops, bandwidth or None,
                    measured.how if newer else kept.how,
                    kept.disturbed and measured.disturbed)


def measure(cores: int) -> Ceilings:
    """Each precision's matrix-product ceiling (the best of PyTorch's and numpy's kernels)
    and the triad's bandwidth on ``cores`` threads, in this process."""
    from threadpoolctl import threadpool_limits

    gflops: dict[str, float] = {}
    kernels: dict[str, str] = {}
    shares: list[float] = []
    with threadpool_limits(cores):
        for kernel, products in _products(cores).items():
            for precision, product in products.items():
                rate, share = _best_rate(product, 2 * GEMM_SIZE**3, cores)
                shares.append(share)
                if rate > gflops.get(precision, 0.0):
                    gflops[precision], kernels[precision] = rate, kernel
        bandwidth = _triad_gb_per_s()
    best = ", ".join(f"{p} by {k}" for p, k in kernels.items())
    return Ceilings(cores, gflops, bandwidth,
                    f"{GEMM_SIZE}^2 products on {cores} thread(s), best of {best}; numpy "
                    f"triad, one thread, {TRIAD_ELEMENTS * 8 >> 20} MiB arrays",
                    min(shares, default=1.0) < UNDISTURBED_SHARE)


def _products(cores: int) -> dict[str, dict[str, Callable[[], object]]]:
    """The kernels that multiply matrices here (PyTorch's MKL / oneDNN, numpy's BLAS), each
    with a product per precision this CPU runs natively."""
    import numpy as np

    a = np.random.default_rng(0).random((GEMM_SIZE, GEMM_SIZE), dtype=np.float32)
    found: dict[str, dict[str, Callable[[], object]]] = {
        f"numpy {np.__version__}": {"fp32": lambda: a @ a}}
    try:
        import torch
    except ImportError:
        return found
    torch.set_num_threads(cores)
    found[f"torch {torch.__version__}"] = _torch_products(torch)
    return found


def _torch_products(torch: Any) -> dict[str, Callable[[], object]]:
    """A product per precision this CPU runs natively."""
    a32 = torch.rand(GEMM_SIZE, GEMM_SIZE)
    products: dict[str, Callable[[], object]] = {"fp32": lambda: torch.mm(a32, a32)}
    if not emulated_bf16_reason():
        a16 = a32.to(torch.bfloat16)
        products["bf16"] = lambda: torch.mm(a16, a16)
    return products


def _best_rate(product: Callable[[], object], operations: int, cores: int
               ) -> tuple[float, float]:
    """(the best of :data:`REPEATS` timings in G operations per second, the share of the
    cores its threads got)."""
    product()  # warm-up: kernels chosen, memory touched
    best, share = 0.0, 1.0
    for _ in range(REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        product()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if operations / wall / 1e9 > best:
            best, share = operations / wall / 1e9, cpu / wall / cores
    return best, min(share, 1.0)


def _triad_gb_per_s() -> float:
    """STREAM's triad ``a = b + s * c`` in numpy, one thread, as two passes: 40 bytes moved
    an element (c read, a written; a and b read, a written)."""
    import numpy as np

    b = np.ones(TRIAD_ELEMENTS)
    c = np.ones(TRIAD_ELEMENTS)
    a = np.empty(TRIAD_ELEMENTS)
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)
        best = min(best, time.perf_counter() - start)
    return 40 * TRIAD_ELEMENTS / best / 1e9


def _cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mlflow-dlaas") / "ceilings"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, required=True)
    args = parser.parse_args(argv)
    print(measure(max(args.cores, 1)).to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
