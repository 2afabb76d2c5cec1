"""A sixth inference runtime, for tests only: the PyTorch model traced to TorchScript.

What a third party ships as its own package; it reaches mlflow-dlaas through one line in its
package metadata (``[mlflow_dlaas.runtimes] torchscript = dlaas_torchscript_runtime:...``).
"""

from __future__ import annotations

import numpy as np

from mlflow_dlaas.backends.pytorch.serving import PyTorchRuntime
from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.backends.serving import InferenceOptions


class TorchScriptRuntime(PyTorchRuntime):
    """PyTorch's runtime (its fresh models, threads and libraries), serving a trace."""

    name = "torchscript"

    def version(self) -> str:
        return f"torchscript {self.torch.__version__}"

    def prepare(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        torch = self.torch
        example = torch.from_numpy(source.reference_inputs[:1])
        traced = torch.jit.trace(source.torch_module.eval(), example)

        def predict(x: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                return traced(torch.from_numpy(np.ascontiguousarray(x))).numpy()

        return predict
