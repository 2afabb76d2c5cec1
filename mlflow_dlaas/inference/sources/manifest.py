"""What a prepared model folder holds, said once: :class:`SourceManifest` is the one writer
and reader of its ``source.json``, and of the reference arrays beside it (the inputs and the
outputs the source framework computed on them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends.feed import Feed
from mlflow_dlaas.backends.served_model import InputSpec, UserModel

SOURCE_FILE = "source.json"
#: The environment variable naming the folder the entry prepared for the measured worker.
SOURCE_ENV = "DLAAS_RUN_SOURCE_DIR"
#: A training run's artifact folders (the layout its runs log, downloaded as is).
ONNX_DIR, MODEL_DIR = "onnx", "model"
#: The reference arrays a training run logs beside its ONNX export.
RUN_REFERENCE_INPUTS, RUN_REFERENCE_OUTPUTS = "reference_inputs.npy", "reference_outputs.npy"
#: The reference arrays of a folder prepared here (fresh export, user's or text model).
REFERENCE_FILE = "reference.npz"
#: The roads a model takes to the runtime.
ROADS = ("fresh", "training_run", "user", "text")


@dataclass(frozen=True)
class SourceManifest:
    """A prepared model: which road it came by, its name, the framework whose outputs are
    the reference, and what the road knows of it."""

    road: str  # one of ROADS
    model: str
    framework: str
    input_shape: tuple[int, ...] = ()  # an architecture's per-sample input (C, H, W)
    num_classes: int = 0
    run_id: str | None = None  # the training run served
    user: UserModel | None = None  # the user's (or a text) model, opened
    forward_flops: int | None = None  # where no architecture counts them
    parameter_count: int | None = None

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / SOURCE_FILE).write_text(json.dumps(self._as_json()))

    @classmethod
    def read(cls, directory: Path) -> SourceManifest:
        about = json.loads((directory / SOURCE_FILE).read_text())
        user = about.pop("user")
        return cls(**{**about, "input_shape": tuple(about["input_shape"]),
                      "user": _user_from_json(user) if user else None})

    def _as_json(self) -> dict[str, Any]:
        user = self.user
        return {"road": self.road, "model": self.model, "framework": self.framework,
                "input_shape": list(self.input_shape), "num_classes": self.num_classes,
                "run_id": self.run_id, "forward_flops": self.forward_flops,
                "parameter_count": self.parameter_count,
                "user": None if user is None else {
                    "kind": user.kind, "path": str(user.path),
                    "onnx_path": str(user.onnx_path) if user.onnx_path else None,
                    "inputs": [[s.name, list(s.shape), s.dtype, s.fixed_batch]
                               for s in user.inputs],
                    "input_data": str(user.input_data) if user.input_data else None}}


def _user_from_json(user: dict[str, Any]) -> UserModel:
    return UserModel(user["kind"], Path(user["path"]),
                     Path(user["onnx_path"]) if user["onnx_path"] else None,
                     tuple(InputSpec(name, tuple(shape), dtype, fixed)
                           for name, shape, dtype, fixed in user["inputs"]),
                     Path(user["input_data"]) if user["input_data"] else None)


def write_reference(directory: Path, inputs: np.ndarray | Feed, outputs: np.ndarray) -> None:
    """The reference inputs (one array, or a Feed of named ones) and outputs."""
    named = ({f"in.{k}": v for k, v in inputs.arrays.items()} if isinstance(inputs, Feed)
             else {"__inputs__": inputs})
    np.savez(directory / REFERENCE_FILE, __outputs__=outputs, **named)


def read_reference(directory: Path) -> tuple[np.ndarray | Feed, np.ndarray] | None:
    """The reference of a prepared folder, or of a training run's download; None where the
    run logged none."""
    if (directory / REFERENCE_FILE).is_file():
        with np.load(directory / REFERENCE_FILE) as saved:
            named = {k.removeprefix("in."): saved[k] for k in saved.files if k.startswith("in.")}
            inputs = Feed(named) if named else saved["__inputs__"]
            return inputs, saved["__outputs__"]
    try:
        return (np.load(directory / ONNX_DIR / RUN_REFERENCE_INPUTS),
                np.load(directory / ONNX_DIR / RUN_REFERENCE_OUTPUTS))
    except OSError:
        return None


def log_reference(directory: Path, inputs: np.ndarray, outputs: np.ndarray) -> None:
    """Write the reference arrays beside a training run's ONNX export."""
    np.save(directory / RUN_REFERENCE_INPUTS, inputs)
    np.save(directory / RUN_REFERENCE_OUTPUTS, outputs)
