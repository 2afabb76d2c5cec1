"""What every backend's reader of a model file shares: the inputs a model declares, filled
from the user's ``-P input_shape`` / ``input_dtype`` (:func:`resolve_inputs`), and the one
error for a file its framework cannot read (:func:`unreadable`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mlflow_dlaas.backends.served_model import InputSpec
from mlflow_dlaas.errors import ConfigError

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

