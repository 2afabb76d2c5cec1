"""Write a small image classifier as an ONNX file, to try the user-model inference study.

    python examples/write_example_onnx.py /tmp/dlaas-example/classifier.onnx

Conv(3->16, 3x3) - ReLU - Conv(16->32, 3x3, stride 2) - ReLU - global average pool - Gemm(32->10),
random weights (seed 0), built with ``onnx.helper``. Its height and width are dynamic, as in
many exported vision models, so the study gives ``input_shape`` (one sample, without the batch
dimension). Serve your own model instead by changing ``model_uri`` in the study spec.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def write(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        fan_in = int(np.prod(shape[1:])) or 1
        values = rng.standard_normal(shape) / np.sqrt(fan_in)
        return numpy_helper.from_array(values.astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["features"]),
        helper.make_node("Gemm", ["features", "w3", "b3"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "example_classifier",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, "height",
                                                                    "width"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [weight("w1", 16, 3, 3, 3), weight("b1", 16), weight("w2", 32, 16, 3, 3),
         weight("b2", 32), weight("w3", 10, 32), weight("b3", 10)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/dlaas-example/classifier.onnx")
    print(write(target.resolve()))
