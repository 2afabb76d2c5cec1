"""What every backend's reader of a model file shares: what a file kind is
(:class:`ModelFormat`, registered by the backend that reads it), the inputs a model declares,
filled from the user's ``-P input_shape`` / ``input_dtype`` (:func:`resolve_inputs`), and the
one error for a file its framework cannot read (:func:`unreadable`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends.feed import Feed
from mlflow_dlaas.backends.served_model import InputSpec
from mlflow_dlaas.errors import ConfigError

#: Per-sample shapes and dtypes the user gave, by input name (None: every input).
Shapes = dict[str | None, tuple[int, ...]]
Dtypes = dict[str | None, str]


@dataclass(frozen=True)
class OpenedModel:
    """A model file opened in its own framework: its inputs, the framework's outputs on a
    feed (the reference every runtime must reproduce), and the framework's own object that
    an ONNX export starts from."""

    inputs: tuple[InputSpec, ...]
    reference: Callable[[Feed], np.ndarray]
    handle: Any = None


#: Set to 1 to open a model file that unpickles code (``torch.save(model)``) you trust.
TRUST_PICKLES_ENV = "DLAAS_TRUST_PICKLED_MODELS"


@dataclass(frozen=True)
class ModelFormat:
    """One kind of model file, registered by the backend whose framework reads it."""

    kind: str  # torchscript, keras, ...
    #: what a runtime's ``consumes`` names to load it natively; also the reference framework
    framework: str
    description: str  # for messages: "a TorchScript .pt file"
    #: whether a path is this kind (ConfigError where it claims the path but cannot read it)
    recognises: Callable[[Path], bool]
    open: Callable[[Path, Shapes, Dtypes], OpenedModel]
    #: the opened model (from ``path``) written as an ONNX file at ``out``: (path, opened,
    #: feed, out); None where this kind has no ONNX export
    export_onnx: Callable[[Path, OpenedModel, Feed, Path], None] | None = None
    export_needs: str = ""  # the module the ONNX export imports, where it is optional
    #: MLflow flavors that hold a file of this kind, and the file inside a downloaded MLflow
    #: model (its folder, the flavor's MLmodel entry), or None
    flavors: tuple[str, ...] = ()
    find_in_mlflow_model: Callable[[Path, dict], Path | None] | None = None
    #: whether opening it unpickles code the file names: only where the user trusts it
    #: (:data:`TRUST_PICKLES_ENV`)
    unpickles_code: bool = False

    def export_missing(self) -> str:
        """The package this kind's ONNX export needs that is not installed here, or ''."""
        import importlib.util

        if self.export_needs and importlib.util.find_spec(self.export_needs) is None:
            return self.export_needs
        return ""

SHAPE_HINT = ("(the shape of one sample, without the batch dimension; name:shape,... for "
              "several inputs)")


def resolve_inputs(declared: list[tuple[str, list[int | None], str]], shapes: dict,
                   dtypes: dict, *, origin: str) -> tuple[InputSpec, ...]:
    """Inputs from what the model declares (name, dims with None where dynamic, dtype) and
    the user's ``-P input_shape`` / ``input_dtype``, which fill or override."""
    if not declared:
        raise ConfigError(f"the {origin} declares no inputs")
    unknown = sorted(str(n) for n in (set(shapes) | set(dtypes)) - {None}
                     - {d[0] for d in declared})
    if unknown:
        raise ConfigError(f"input_shape / input_dtype name input(s) {', '.join(unknown)}; "
                          f"the model's inputs are {', '.join(d[0] for d in declared)}")
    specs = []
    for name, dims, dtype in declared:
        given = shapes.get(name, shapes.get(None))
        if not dims:
            raise ConfigError(f"input {name!r} of the {origin} is a scalar: there is no batch "
                              "dimension to measure over")
        batch, rest = dims[0], dims[1:]
        if given is not None:
            if any(d is not None and d != g for d, g in zip(rest, given, strict=False)) or (
                    rest and len(given) != len(rest)):
                raise ConfigError(f"input_shape {'x'.join(map(str, given))} does not fit input "
                                  f"{name!r} of shape {_dims(dims)} (per sample: "
                                  f"{_dims(rest)})")
            rest = list(given)
        if any(d is None for d in rest):
            raise ConfigError(f"input {name!r} has dynamic dimensions {_dims(dims)}; give "
                              f"-P input_shape={name}:{_example(rest)} {SHAPE_HINT}")
        specs.append(InputSpec(name, tuple(int(d) for d in rest),
                               dtypes.get(name, dtypes.get(None, dtype)), batch))
    return tuple(specs)



def _dims(dims: Sequence[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"



def _example(rest: Sequence[int | None]) -> str:
    return "x".join("N" if d is None else str(d) for d in rest) or "N"



def article(word: str) -> str:
    """'an' before a vowel sound as spoken (an ONNX, a TorchScript, a Keras)."""
    return "an" if word[:1].upper() in "AEIOU" else "a"



def unreadable(path: Path, framework: str, error: Exception) -> ConfigError:
    """The error for a model file ``framework`` cannot read: its name and the first line of
    the framework's own complaint."""
    text = str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__
    kind = f"{article(framework)} {framework}"
    return ConfigError(f"cannot read {path.name} as {kind} model: {text}")

