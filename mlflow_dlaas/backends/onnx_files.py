"""The ONNX file, the format both ONNX runtimes load (ONNX Runtime, OpenVINO): its declared
inputs, and a reference to check a runtime against (ONNX's own reference evaluator, else ONNX
Runtime with every optimisation off)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlflow_dlaas.backends.feed import Feed
from mlflow_dlaas.backends.model_files import (
    Dtypes,
    ModelFormat,
    OpenedModel,
    Shapes,
    resolve_inputs,
    unreadable,
)

#: What a runtime that loads ONNX files names in its ``consumes``.
ONNX = "onnx"


def open_onnx(path: Path, shapes: Shapes, dtypes: Dtypes) -> OpenedModel:
    """The ONNX graph's inputs, and ONNX's own reference evaluator as the reference."""
    import onnx
    from onnx import helper

    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)  # runtimes report what it lets through (types)
    except Exception as e:  # protobuf DecodeError, ValidationError, ...
        raise unreadable(path, "ONNX", e) from None
    weights = {i.name for i in model.graph.initializer}
    declared = []
    for value in model.graph.input:
        if value.name in weights:
            continue
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)).name
        declared.append((value.name, dims, dtype))
    specs = resolve_inputs(declared, shapes, dtypes, origin=f"ONNX graph {path.name}")

    def reference(feed: Feed) -> np.ndarray:
        try:
            from onnx.reference import ReferenceEvaluator

            return np.asarray(ReferenceEvaluator(model).run(None, feed.arrays)[0])
        except Exception:  # an operator the evaluator lacks: ONNX Runtime, unoptimised
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            session = ort.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
            return np.asarray(session.run(None, feed.arrays)[0])

    return OpenedModel(specs, reference)


def quantize_static_qdq(path: Path, calibration: np.ndarray | Feed) -> Path:
    """int8 weights and activations ahead of time, as QuantizeLinear / DequantizeLinear pairs
    (QDQ, which ONNX Runtime and OpenVINO both run in int8): activation ranges calibrated on
    ``calibration`` (the reference inputs), weights per channel, unsigned activations and
    signed weights (U8S8, x86's VNNI kernels)."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    if isinstance(calibration, Feed):
        samples = [{k: v[i:i + 1] for k, v in calibration.arrays.items()}
                   for i in range(len(calibration))]
    else:
        name = onnx.load(str(path), load_external_data=False).graph.input[0].name
        samples = [{name: calibration[i:i + 1]} for i in range(len(calibration))]

    class Samples(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.left, None)

    out = path.with_name(path.stem + ".int8-static.onnx")
    quantize_static(str(path), str(out), Samples(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    return out


def _onnx_in_mlflow_model(folder: Path, flavor: dict) -> Path | None:
    path = folder / flavor.get("data", "model.onnx")
    return path if path.is_file() else None


ONNX_FILE = ModelFormat(
    kind="onnx", framework=ONNX, description="an .onnx file",
    recognises=lambda path: path.is_file() and path.suffix.lower() == ".onnx",
    open=open_onnx, flavors=("onnx",), find_in_mlflow_model=_onnx_in_mlflow_model)

#: The formats this module registers (``mlflow_dlaas.backends.formats``).
FORMATS = (ONNX_FILE,)
