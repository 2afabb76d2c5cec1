"""A sixth inference runtime, for tests only: the PyTorch model traced to TorchScript.

What a third party ships as its own package; it reaches mlflow-dlaas through one line in its
package metadata (``[mlflow_dlaas.runtimes] torchscript = dlaas_torchscript_runtime:...``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlflow_dlaas.backends.pytorch.training import libraries_in_force, threads_in_force
from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.backends.serving import InferenceOptions, InferenceRuntime


class TorchScriptRuntime(InferenceRuntime):
    name = "torchscript"
    module = "torch"
    extra = "torch"
    consumes = "pytorch"
    native_library = "libtorch_cpu"

    def load(self) -> None:
        import torch

        self.torch = torch

    def version(self) -> str:
        return f"torchscript {self.torch.__version__}"

    def threads_in_force(self) -> dict[str, Any]:
        return threads_in_force(self.torch)

    def libraries_in_force(self) -> dict[str, Any]:
        return libraries_in_force(self.torch)

    def prepare(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        torch = self.torch
        example = torch.from_numpy(source.reference_inputs[:1])
        traced = torch.jit.trace(source.torch_module.eval(), example)

        def predict(x: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                return traced(torch.from_numpy(np.ascontiguousarray(x))).numpy()

        return predict
