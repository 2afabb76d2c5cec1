"""PyTorch's model files (TorchScript, ``torch.export``, a pickled module): recognising and
reading one, its declared inputs, and its export to ONNX for the ONNX runtimes. Registered as
:data:`FORMATS`."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas.backends.feed import Feed
from mlflow_dlaas.backends.model_files import (
    SHAPE_HINT,
    TRUST_PICKLES_ENV,
    Dtypes,
    ModelFormat,
    OpenedModel,
    Shapes,
    article,
    resolve_inputs,
    unreadable,
)
from mlflow_dlaas.backends.served_model import InputSpec
from mlflow_dlaas.errors import ConfigError


def load_torch(torch: Any, kind: str, path: Path) -> Any:
    """The PyTorch module of a TorchScript, torch.export or pickled-module file; a pickled
    module only where the user said they trust it (:data:`TRUST_PICKLES_ENV`)."""
    try:
        if kind == "torchscript":
            return torch.jit.load(str(path), map_location="cpu").eval()
        if kind == "torch_export":
            return torch.export.load(str(path)).module()
        module = _load_pickle(torch, path)
    except ConfigError:
        raise
    except Exception as e:
        raise unreadable(path, f"PyTorch ({kind})", e) from None
    if not isinstance(module, torch.nn.Module):
        held = type(module).__name__
        raise ConfigError(f"{path.name} holds {article(held)} {held}, not a module (a "
                          "state_dict has no architecture): save it with torch.jit.save or "
                          "torch.export.save")
    return module.eval()



def _load_pickle(torch: Any, path: Path) -> Any:
    """What a ``torch.save`` file holds: tensors and containers as data (PyTorch's
    ``weights_only`` unpickler runs no code); a pickled module only where trusted."""
    import pickle

    try:
        return torch.load(str(path), weights_only=True, map_location="cpu")
    except pickle.UnpicklingError:
        if os.environ.get(TRUST_PICKLES_ENV) != "1":
            raise ConfigError(
                f"{path.name} is a pickled PyTorch module: loading it runs whatever code the "
                "file names, so it is not loaded. Save it with torch.jit.save or "
                "torch.export.save (neither runs code), or, for a file you trust, set "
                f"{TRUST_PICKLES_ENV}=1") from None
    return torch.load(str(path), weights_only=False, map_location="cpu")


def _torch_declared(torch: Any, kind: str, path: Path) -> list[tuple[str, list, str]]:
    if kind != "torch_export":
        return []
    program = torch.export.load(str(path))
    names = set(program.graph_signature.user_inputs)
    declared = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in names:
            value = node.meta["val"]
            dims = [d if isinstance(d, int) else None for d in value.shape]
            declared.append((node.name, dims, str(value.dtype).removeprefix("torch.")))
    return declared



def open_torch(kind: str, path: Path, shapes: Shapes, dtypes: Dtypes) -> OpenedModel:
    """The module of a ``kind`` file, its inputs (declared, or the user's), and its outputs
    in eager PyTorch as the reference."""
    import torch

    module = load_torch(torch, kind, path)
    declared = _torch_declared(torch, kind, path)
    if not declared:  # TorchScript and pickled modules record no input shapes
        names = [n for n in shapes if n is not None] or ["input"]
        if not shapes:
            raise ConfigError(f"a {kind} model records no input shapes; give -P input_shape="
                              f"3x224x224 {SHAPE_HINT}, and -P input_dtype when not float32")
        declared = [(n, [None, *([None] * len(shapes.get(n, shapes.get(None)) or ()))],
                     "float32") for n in names]
    specs = resolve_inputs(declared, shapes, dtypes, origin=f"PyTorch model {path.name}")

    def reference(feed: Feed) -> np.ndarray:
        with torch.inference_mode():
            return first_output(module(*[torch.from_numpy(feed[s.name]) for s in specs]))

    return OpenedModel(specs, reference, module)


def first_output(out: Any) -> np.ndarray:
    """The first output of a model call (a tensor, a tuple / list / dict of them)."""
    while isinstance(out, (tuple, list)):
        out = out[0]
    if isinstance(out, dict):
        out = next(iter(out.values()))
    if hasattr(out, "detach"):
        out = out.detach().cpu().float().numpy() if out.is_floating_point() else out.numpy()
    return np.asarray(out)



def export_torch(module: Any, specs: Sequence[InputSpec], feed: Feed, path: Path) -> None:
    """ONNX of a PyTorch model, batch dimension dynamic (unless the model fixes it). A
    ``torch.export`` file (``module`` is its path) goes through the dynamo exporter, which
    keeps the program's own dynamic dimensions; other modules through the TorchScript one."""
    import contextlib
    import io
    import warnings

    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    example = tuple(torch.from_numpy(feed[s.name][:1] if not s.fixed_batch else feed[s.name])
                    for s in specs)
    names = [s.name for s in specs]
    dynamic = {n: {0: "batch"} for s, n in zip(specs, names, strict=True) if not s.fixed_batch}
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            if isinstance(module, Path):
                program = torch.export.load(str(module))
                torch.onnx.export(program, example, str(path), dynamo=True,
                                  external_data=False)
            else:
                torch.onnx.export(module, example, str(path), input_names=names,
                                  dynamic_axes=dynamic or None, dynamo=False)
    except Exception as e:
        raise ConfigError(f"exporting the PyTorch model to ONNX failed, so the ONNX runtimes "
                          f"cannot serve it: {str(e).strip().splitlines()[0][:300]}") from None


#: The suffixes of PyTorch model files (TorchScript archives and torch.save's).
TORCH_SUFFIXES = (".pt", ".pth", ".ts", ".jit", ".torchscript")


def _archive_names(path: Path) -> list[str] | None:
    """The members of a PyTorch zip archive with a PyTorch suffix, or None for other files;
    ConfigError where such a file is no archive."""
    import zipfile

    if not path.is_file() or path.suffix.lower() not in TORCH_SUFFIXES:
        return None
    try:
        return zipfile.ZipFile(path).namelist()
    except (zipfile.BadZipFile, OSError):
        raise ConfigError(f"cannot read {path.name} as a PyTorch model: not a TorchScript "
                          "or torch.save archive") from None


def _is_torchscript(path: Path) -> bool:
    names = _archive_names(path)  # TorchScript archives hold code/; torch.save's only data
    return names is not None and any("/code/" in n for n in names)


def _is_torch_pickle(path: Path) -> bool:
    names = _archive_names(path)
    return names is not None and not any("/code/" in n for n in names)


def _first_in_pytorch_flavor(pattern: str) -> Callable[[Path, dict], Path | None]:
    def find(folder: Path, flavor: dict) -> Path | None:
        found = sorted((folder / flavor.get("model_data", "data")).glob(pattern))
        return found[0] if found else None

    return find


def _opener(kind: str) -> Callable[[Path, Shapes, Dtypes], OpenedModel]:
    return lambda path, shapes, dtypes: open_torch(kind, path, shapes, dtypes)


def _export_module(path: Path, opened: OpenedModel, feed: Feed, out: Path) -> None:
    export_torch(opened.handle, opened.inputs, feed, out)


def _export_program(path: Path, opened: OpenedModel, feed: Feed, out: Path) -> None:
    export_torch(path, opened.inputs, feed, out)  # the dynamo exporter reads the program


FORMATS = (
    ModelFormat("torch_export", "pytorch", "a torch.export .pt2 file",
                recognises=lambda path: path.is_file() and path.suffix.lower() == ".pt2",
                open=_opener("torch_export"), export_onnx=_export_program,
                flavors=("pytorch",), find_in_mlflow_model=_first_in_pytorch_flavor("*.pt2")),
    ModelFormat("torchscript", "pytorch", "a TorchScript .pt file",
                recognises=_is_torchscript, open=_opener("torchscript"),
                export_onnx=_export_module),
    ModelFormat("torch_pickle", "pytorch", "a torch.save'd module (.pth)",
                recognises=_is_torch_pickle, open=_opener("torch_pickle"),
                export_onnx=_export_module, flavors=("pytorch",),
                find_in_mlflow_model=_first_in_pytorch_flavor("*.pth"), unpickles_code=True),
)
