"""openvino's build, for the run's fingerprint: read from the imported module itself."""

from __future__ import annotations

from typing import Any


def read(ov: Any) -> dict[str, Any]:
    """What the fingerprint records of openvino's build (``openvino`` imported)."""
    return {
        "openvino_build": ov.get_version(),
        "openvino_devices": ",".join(ov.Core().available_devices),
    }
