"""PyTorch eager (``torch.compile`` as an option)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas._imports import import_optional
from mlflow_dlaas.backends.pytorch import build
from mlflow_dlaas.backends.pytorch.fresh import export_torch_onnx, fresh_torch_source
from mlflow_dlaas.backends.pytorch.training import libraries_in_force, set_threads, threads_in_force
from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.backends.serving import InferenceOptions, InferenceRuntime
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.models.spec import ArchitectureSpec
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.precision import Precision


class PyTorchRuntime(InferenceRuntime):
    name = "pytorch"
    module = "torch"
    extra = "torch"
    consumes = "pytorch"
    modules = ("torch",)
    precisions = {Precision.FP32: ("cpu", "cuda"), Precision.BF16: ("cpu", "cuda"),
                  Precision.FP16: ("cuda",)}
    instead = {Precision.INT8: "the pytorch runtime has no maintained int8 path on the CPU "
                               "(torch.ao's eager quantization is deprecated): serve int8 with "
                               "onnxruntime (quantization dynamic or static) or openvino "
                               "(static)",
               Precision.FP16: "fp16 needs device=cuda (half precision on this CPU is not a "
                               "supported inference path)"}
    native_library = "libtorch_cpu"

    def build_details(self, imported: Any) -> dict[str, Any]:
        return build.read(imported)

    def load(self) -> None:
        self.torch = import_optional("torch", extra=self.extra, purpose="The pytorch runtime")

    def version(self) -> str:
        return str(self.torch.__version__)

    def threads_in_force(self) -> dict[str, Any]:
        return threads_in_force(self.torch)

    def libraries_in_force(self) -> dict[str, Any]:
        return libraries_in_force(self.torch)

    def apply_threads(self, settings: ParallelismSettings) -> None:
        set_threads(self.torch, settings)

    def fresh_source(self, spec: ArchitectureSpec, shape: tuple[int, int, int], classes: int,
                     inputs: np.ndarray, seed: int) -> ModelSource:
        """The module itself, built here, and its eager outputs as the reference."""
        return fresh_torch_source(self.torch, spec, shape, classes, inputs, seed)

    def export_onnx(self, source: ModelSource, path: Path) -> None:
        export_torch_onnx(self.torch, source, path)

    def prepare(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        torch = self.torch
        if options.device == "cuda" and not torch.cuda.is_available():
            raise ConfigError("device cuda requested, but PyTorch sees no CUDA GPU here")
        if source.user is not None:
            return self._prepare_user(source, options)
        module = source.torch_module
        if module is None:
            if source.trained_with != "pytorch":
                raise ConfigError(f"run {source.run_id} was trained with {source.trained_with};"
                                  " the pytorch runtime loads PyTorch runs only (serve its ONNX"
                                  " export with onnxruntime or openvino)")
            module = torch.load(_saved_model(source) / "data" / "model.pth", weights_only=False)
        device = torch.device(options.device)
        dtype = _dtype(torch, options.precision)
        module = module.to(device=device, dtype=dtype).eval()
        if options.torch_compile:
            module = torch.compile(module)
        if options.device == "cpu" and dtype == torch.float32:

            def predict_cpu(x: np.ndarray) -> np.ndarray:  # no conversions on the hot path
                with torch.inference_mode():
                    return module(torch.from_numpy(x)).numpy()

            return predict_cpu

        def predict(x: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                out = module(torch.from_numpy(x).to(device=device, dtype=dtype))
                if options.device == "cuda":
                    torch.cuda.synchronize()
                return out.float().cpu().numpy()

        return predict


    def _prepare_user(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        """The user's TorchScript / torch.export / pickled module, on its named inputs."""
        from mlflow_dlaas.backends.pytorch.formats import first_output, load_torch

        torch, user = self.torch, source.user
        assert user is not None
        module = load_torch(torch, user.kind, user.path)
        device = torch.device(options.device)
        dtype = _dtype(torch, options.precision)
        module = module.to(device)
        if dtype != torch.float32:
            module = module.to(dtype)
        if options.torch_compile:
            if isinstance(module, torch.jit.ScriptModule):
                raise ConfigError(
                    f"torch_compile=true cannot compile {user.path.name}: torch.compile does "
                    "not take TorchScript models; save the model with torch.export.save (a "
                    ".pt2 file) or log the eager module as an MLflow pytorch model")
            module = torch.compile(module)
        names = [s.name for s in user.inputs]

        def tensor(a: np.ndarray) -> Any:
            t = torch.from_numpy(a).to(device)
            return t.to(dtype) if t.is_floating_point() else t

        def predict(x: Any) -> np.ndarray:
            with torch.inference_mode():
                out = first_output(module(*[tensor(x[n]) for n in names]))
            if options.device == "cuda":
                torch.cuda.synchronize()
            return out

        return predict


def _dtype(torch: Any, precision: Precision) -> Any:
    """The module's and its floating inputs' dtype at ``precision`` (fp32, bf16, fp16)."""
    return {Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}.get(
        precision, torch.float32)


def _saved_model(source: ModelSource) -> Path:
    if source.model_dir is None:
        raise ConfigError(f"run {source.run_id} has no saved model (it was trained with "
                          "-P log_model=false); serve its ONNX export with onnxruntime")
    return source.model_dir
