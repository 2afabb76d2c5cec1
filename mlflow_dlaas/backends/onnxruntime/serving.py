"""ONNX Runtime: CPU provider, CUDA and TensorRT when present; int8 dynamic quantization."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas._imports import import_optional
from mlflow_dlaas.backends.onnx_files import quantize_static_qdq
from mlflow_dlaas.backends.onnxruntime import build
from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.backends.serving import InferenceOptions, InferenceRuntime
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.libraries.settings import refuse_unusable
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.precision import Precision

OPT_LEVELS = ("disable", "basic", "extended", "all")
EXECUTION_MODES = ("sequential", "parallel")
#: ONNX Runtime's switch for its telemetry, read once when it loads (non-Windows builds).
TELEMETRY_ENV = "ORT_DISABLE_TELEMETRY"


class OnnxRuntimeRuntime(InferenceRuntime):
    name = "onnxruntime"
    module = "onnxruntime"
    extra = "onnxruntime"
    consumes = "onnx"
    modules = ("onnxruntime", "torch")  # a fresh model is exported from PyTorch
    precisions = {Precision.FP32: ("cpu", "cuda"), Precision.INT8: ("cpu", "cuda"),
                  Precision.FP16: ("cuda",)}
    instead = {Precision.FP16: "fp16 needs device=cuda; on the CPU use fp32 or int8",
               Precision.BF16: "ONNX Runtime's CPU provider has no bf16 kernels for "
                               "convolutions and most operators (bf16 is a CUDA provider "
                               "type there): serve bf16 with openvino or pytorch"}
    int8_quantizations = ("dynamic", "static")

    def build_details(self, imported: Any) -> dict[str, Any]:
        return build.read(imported)

    def environment(self, settings: ParallelismSettings) -> dict[str, str]:
        """ONNX Runtime's telemetry (on by default on Linux since 1.32) off, unless the user set
        it: no uploader thread in the measured process, no ``.ses`` file left in the temp dir.

        OpenMP settings and ``onednn`` are refused: the released wheels run the CPU provider
        on ONNX Runtime's own thread pool (no OpenMP is linked), and oneDNN is a separate
        execution provider (``DnnlExecutionProvider``) of source builds, not in the wheels."""
        refuse_unusable(settings, self.name, openmp="ONNX Runtime uses no OpenMP (its CPU "
                        "provider runs on its own thread pool)", onednn="ONNX Runtime's CPU "
                        "execution provider does not use oneDNN (oneDNN is the separate "
                        "DnnlExecutionProvider of a source build, not in the onnxruntime "
                        "wheels)")
        return {TELEMETRY_ENV: os.environ.get(TELEMETRY_ENV, "1")}

    def load(self) -> None:
        self.ort = import_optional("onnxruntime", extra=self.extra,
                                   purpose="The onnxruntime runtime")

    def version(self) -> str:
        return str(self.ort.__version__)

    def threads_in_force(self) -> dict[str, Any]:
        return dict(self._in_force)

    def libraries_in_force(self) -> dict[str, Any]:
        """oneDNN is off: the session runs on the providers it reports (never Dnnl here)."""
        providers = self._in_force["providers"].split(",")
        return {"onednn": "on" if "DnnlExecutionProvider" in providers else "off",
                "providers": providers,
                "available_providers": list(self.ort.get_available_providers())}

    def providers(self, device: str) -> list[str]:
        available = self.ort.get_available_providers()
        if device == "cpu":
            return ["CPUExecutionProvider"]
        wanted = [p for p in ("TensorrtExecutionProvider", "CUDAExecutionProvider")
                  if p in available]
        if not wanted:
            raise ConfigError("device cuda requested, but this ONNX Runtime has no CUDA "
                              f"provider (available: {', '.join(available)}); install "
                              "onnxruntime-gpu")
        return [*wanted, "CPUExecutionProvider"]

    def prepare(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        ort = self.ort
        path = source.onnx_file(self.name)
        if options.graph_optimization_level not in OPT_LEVELS:
            raise ConfigError(f"graph_optimization_level must be one of {', '.join(OPT_LEVELS)}")
        if options.execution_mode not in EXECUTION_MODES:
            raise ConfigError(f"execution_mode must be one of {', '.join(EXECUTION_MODES)}")
        path, quantization = _at_precision(path, source, options)
        half = options.precision is Precision.FP16  # fp16 inputs, converted at the call
        so = ort.SessionOptions()
        so.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[options.graph_optimization_level]
        so.execution_mode = (ort.ExecutionMode.ORT_PARALLEL if options.execution_mode ==
                             "parallel" else ort.ExecutionMode.ORT_SEQUENTIAL)
        settings = options.parallelism
        if settings.intra_op_threads is not None:
            so.intra_op_num_threads = settings.intra_op_threads
        if settings.inter_op_threads is not None:
            so.inter_op_num_threads = settings.inter_op_threads
        try:
            session = ort.InferenceSession(str(path), so,
                                           providers=self.providers(options.device))
        except Exception as e:  # ONNX Runtime's Fail, InvalidGraph, ... (no common base)
            raise ConfigError(f"onnxruntime cannot load {path.name}: "
                              f"{str(e).strip().splitlines()[0][:400]}") from None
        self._in_force = {"intra_op_threads": so.intra_op_num_threads or "default (cores)",
                          "inter_op_threads": so.inter_op_num_threads or "default",
                          "providers": ",".join(session.get_providers()),
                          "quantization": quantization}
        name = session.get_inputs()[0].name
        run = session.run
        if source.user is not None:  # named inputs, in a Feed

            def predict_feed(x: Any) -> np.ndarray:
                if half:
                    return run(None, {k: a.astype(np.float16) if a.dtype == np.float32 else a
                                      for k, a in x.arrays.items()})[0].astype(np.float32)
                return run(None, x.arrays)[0]

            return predict_feed
        if not half:

            def predict_fp32(x: np.ndarray) -> np.ndarray:  # no conversions on the hot path
                return run(None, {name: x})[0]

            return predict_fp32

        def predict(x: np.ndarray) -> np.ndarray:
            return run(None, {name: x.astype(np.float16)})[0].astype(np.float32)

        return predict


def _at_precision(path: Path, source: ModelSource, options: InferenceOptions
                  ) -> tuple[Path, str]:
    """The ONNX file converted to ``options``' precision (int8 dynamic or static QDQ, fp16;
    fp32 as it is), and how it was quantized."""
    static = options.quantization == "static"
    convert = {
        Precision.INT8: lambda: (quantize_static_qdq(path, source.reference_inputs),
                                 "static QDQ") if static else
                                (quantize_int8(path), "dynamic (MatMul, Gemm)"),
        Precision.FP16: lambda: (to_fp16(path), "none"),
    }.get(options.precision)
    return convert() if convert else (path, "none")


def quantize_int8(path: Path) -> Path:
    """ONNX Runtime's dynamic quantization: int8 weights, activations quantized at run time."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = path.with_name(path.stem + ".int8.onnx")
    quantize_dynamic(str(path), str(out), weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul", "Gemm"])
    return out


def to_fp16(path: Path) -> Path:
    """Weights and activations in half precision (GPU), inputs and outputs too."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    out = path.with_name(path.stem + ".fp16.onnx")
    onnx.save(convert_float_to_float16(onnx.load(str(path))), str(out))
    return out
