"""OpenVINO on the CPU (the seed found it the best CPU runtime), from the ONNX export."""

from __future__ import annotations

from typing import Any

import numpy as np

from mlflow_dlaas._imports import import_optional
from mlflow_dlaas.backends.onnx_files import quantize_static_qdq
from mlflow_dlaas.backends.openvino import build
from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.backends.serving import InferenceOptions, InferenceRuntime
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.libraries.settings import refuse_unusable
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.precision import Precision

#: OpenVINO's INFERENCE_PRECISION_HINT per precision (int8: the QDQ model's own, f32 around)
HINTS = {Precision.FP32: "f32", Precision.BF16: "bf16", Precision.INT8: "f32"}


class OpenVINORuntime(InferenceRuntime):
    name = "openvino"
    module = "openvino"
    extra = "openvino"
    consumes = "onnx"
    modules = ("openvino", "torch")  # a fresh model is exported from PyTorch
    precisions = {p: ("cpu",) for p in HINTS}
    instead = {Precision.FP16: "fp16 needs a GPU; the openvino runtime is measured on the CPU "
                               "here: use fp32, bf16 (a CPU with native bf16) or int8",
               **{p: "the openvino runtime is measured on the CPU here; use device=cpu"
                  for p in HINTS}}
    int8_quantizations = ("static",)  # dynamic quantization is ONNX Runtime's

    def build_details(self, imported: Any) -> dict[str, Any]:
        return build.read(imported)

    def environment(self, settings: ParallelismSettings) -> dict[str, str]:
        """OpenMP settings and ``onednn`` are refused: OpenVINO's CPU plugin is built on
        oneDNN and always uses it, and it runs its threads on TBB (libtbb), not OpenMP. So is
        ``allocator``: OpenVINO aborts with a preloaded malloc."""
        refuse_unusable(settings, self.name, openmp="OpenVINO uses no OpenMP (its CPU plugin "
                        "runs its threads on TBB)", onednn="OpenVINO's CPU plugin is built "
                        "on oneDNN and always uses it (it has no switch)")
        if settings.allocator != "default":
            raise ConfigError(f"allocator={settings.allocator}: OpenVINO's Core aborts in a "
                              "process with a preloaded malloc (jemalloc and tcmalloc alike: "
                              "'munmap_chunk(): invalid pointer', glibc's free handed memory "
                              "it did not allocate); leave allocator unset for openvino")
        return {}

    def load(self) -> None:
        self.ov = import_optional("openvino", extra=self.extra, purpose="The openvino runtime")

    def version(self) -> str:
        return str(self.ov.get_version())

    def threads_in_force(self) -> dict[str, Any]:
        return dict(self._in_force)

    def libraries_in_force(self) -> dict[str, Any]:
        """oneDNN is on by build (the CPU plugin's kernels); the devices OpenVINO sees."""
        return {"onednn": "on", "devices": list(self.ov.Core().available_devices)}

    def prepare(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        core = self.ov.Core()
        int8 = options.precision is Precision.INT8  # a statically quantized (QDQ) model
        # the precision asked, always said: on CPUs with bf16 units OpenVINO otherwise infers
        # in bf16; an int8 (QDQ) model runs its quantized parts in int8, the rest in f32
        hint = HINTS[options.precision]
        config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": hint}
        if options.parallelism.intra_op_threads is not None:
            config["INFERENCE_NUM_THREADS"] = options.parallelism.intra_op_threads
        if options.parallelism.inter_op_threads is not None:
            config["NUM_STREAMS"] = options.parallelism.inter_op_threads
        path = source.onnx_file(self.name)
        if int8:
            path = quantize_static_qdq(path, source.reference_inputs)
        try:
            compiled = core.compile_model(str(path), "CPU", config)
        except RuntimeError as e:  # unreadable or unsupported model: its own words, short
            raise ConfigError(f"openvino cannot load {path.name}: {_gist(str(e))}") from None
        self._in_force = {"intra_op_threads": compiled.get_property("INFERENCE_NUM_THREADS"),
                          "inter_op_threads": str(compiled.get_property("NUM_STREAMS")),
                          "inference_precision": compiled.get_property(
                              "INFERENCE_PRECISION_HINT").get_type_name(),  # f32, bf16
                          "quantization": "static QDQ" if int8 else "none"}
        if self._in_force["inference_precision"] != hint:  # what it runs, read back
            raise ConfigError(f"OpenVINO was asked for {options.precision} and runs "
                              f"{self._in_force['inference_precision']} on this CPU")
        request = compiled.create_infer_request()
        # share_inputs: the batch is read in place (zero-copy where it is C-contiguous and of
        # the input's type), as benchmark_app's tensors are; else a 19 MB ResNet-50 batch of
        # 32 is copied before every call
        if source.user is not None:  # named inputs, in a Feed

            def predict_feed(x: Any) -> np.ndarray:
                return np.array(request.infer(x.arrays, share_inputs=True)[0], copy=True)

            return predict_feed

        def predict(x: np.ndarray) -> np.ndarray:
            return np.array(request.infer([x], share_inputs=True)[0], dtype=np.float32,
                            copy=True)

        return predict


def _gist(message: str) -> str:
    """The telling lines of an OpenVINO error (it leads with source locations)."""
    lines = [line.strip() for line in message.splitlines() if line.strip() and not line.strip()
             .startswith(("Exception from", "Check '", "Summary:"))]
    return "; ".join(lines[-2:])[:400] or message.strip()[:400]
