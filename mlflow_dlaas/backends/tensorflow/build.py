"""tensorflow's build, for the run's fingerprint: read from the imported module itself."""

from __future__ import annotations

import os
from typing import Any


def read(tf: Any) -> dict[str, Any]:
    """What the fingerprint records of tensorflow's build (``tensorflow`` imported)."""
    info = dict(tf.sysconfig.get_build_info())
    return {
        "tensorflow_cuda_build": bool(info.get("is_cuda_build")),
        "tensorflow_cuda": info.get("cuda_version", "none"),
        "tensorflow_cudnn": info.get("cudnn_version", "none"),
        "tensorflow_onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"),
    }
