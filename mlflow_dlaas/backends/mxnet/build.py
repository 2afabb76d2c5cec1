"""mxnet's build, for the run's fingerprint: read from the imported module itself."""

from __future__ import annotations

from typing import Any


def read(mx: Any) -> dict[str, Any]:
    """What the fingerprint records of mxnet's build (``mxnet`` imported)."""
    features = mx.runtime.Features()
    return {"mxnet_features": ",".join(sorted(f.name for f in features.values() if f.enabled))}
