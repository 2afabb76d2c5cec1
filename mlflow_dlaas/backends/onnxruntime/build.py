"""onnxruntime's build, for the run's fingerprint: read from the imported module itself."""

from __future__ import annotations

from typing import Any


def read(ort: Any) -> dict[str, Any]:
    """What the fingerprint records of onnxruntime's build (``onnxruntime`` imported)."""
    return {
        "onnxruntime_providers": ",".join(ort.get_available_providers()),
        "onnxruntime_device": ort.get_device(),
    }
