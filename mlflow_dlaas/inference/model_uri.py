"""A ``model_uri`` read once, into what it names: a run of MLflow (``runs:/<id>[/path]`` or
a bare run id), a registered model (``models:/name/version`` or ``@alias``), an artifact of a
tracking server (``mlflow-artifacts:/``), another remote store (``s3://``, ...), or a local
file or folder (a path or ``file://``). Everything else receives the parsed value."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mlflow_dlaas.errors import ConfigError

_RUN = re.compile(r"(?:runs:/)?(?P<id>[0-9a-f]{32})(?:/(?P<path>.*))?")
_REGISTERED = re.compile(r"models:/(?P<name>[^/@]+).*")
_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:/")

KINDS = ("run", "registered", "artifacts", "remote", "file")


@dataclass(frozen=True)
class ModelUri:
    """What a ``model_uri`` names; ``text`` as given."""

    text: str
    kind: str  # one of KINDS
    run_id: str | None = None  # kind "run"
    run_path: str = ""  # kind "run": the artifact path inside the run ("" for the run itself)
    registered_name: str = ""  # kind "registered"
    path: Path | None = None  # kind "file"

    @property
    def label(self) -> str:
        """A short name for the model: a file's stem (``resnet50`` for ``/m/resnet50.onnx``),
        a registered model's name, ``run-<8 hex>`` for a run."""
        if self.kind == "run":
            return self.run_path.rsplit("/", 1)[-1] if self.run_path else f"run-{self.run_id[:8]}"
        if self.kind == "registered":
            return self.registered_name
        stem = PurePosixPath(self.text.removeprefix("file://").rstrip("/")).name.split(".")[0]
        return stem or "model"

    def require_run(self) -> str:
        """The run id; ConfigError when the URI names no run."""
        if self.kind != "run":
            raise ConfigError(f"model_uri {self.text!r} is not runs:/<run id> or a run id")
        return self.run_id


def parse_model_uri(text: str) -> ModelUri:
    """``text`` read into the :class:`ModelUri` it names."""
    stripped = text.strip()
    found = _RUN.fullmatch(stripped.rstrip("/"))
    if found:
        return ModelUri(stripped, "run", run_id=found["id"], run_path=found["path"] or "")
    registered = _REGISTERED.fullmatch(stripped)
    if registered:
        return ModelUri(stripped, "registered", registered_name=registered["name"])
    if stripped.startswith("mlflow-artifacts:/"):
        return ModelUri(stripped, "artifacts")
    if stripped.startswith("file://"):
        return ModelUri(stripped, "file", path=Path(stripped[len("file://"):]))
    if _SCHEME.match(stripped):
        return ModelUri(stripped, "remote")
    return ModelUri(stripped, "file", path=Path(stripped).expanduser())
