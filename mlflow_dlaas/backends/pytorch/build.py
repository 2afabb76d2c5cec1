"""torch's build, for the run's fingerprint: read from the imported module itself."""

from __future__ import annotations

from typing import Any


def read(torch: Any) -> dict[str, Any]:
    """What the fingerprint records of torch's build (``torch`` imported)."""
    parallel = torch.__config__.parallel_info()
    return {
        "torch_build": torch.__config__.show(),
        "torch_parallel_info": parallel,
        "torch_cuda": torch.version.cuda or "none",
        "torch_cudnn": str(torch.backends.cudnn.version()) if torch.cuda.is_available() else "none",
        "torch_mkldnn": torch.backends.mkldnn.is_available(),
    }
