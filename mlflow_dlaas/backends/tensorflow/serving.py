"""TensorFlow (Keras), with and without XLA."""

from __future__ import annotations

from typing import Any

import numpy as np

from mlflow_dlaas._imports import import_optional
from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.backends.serving import InferenceOptions, InferenceRuntime
from mlflow_dlaas.backends.tensorflow import build
from mlflow_dlaas.backends.tensorflow.training import (
    libraries_in_force,
    library_environment,
    quiet_environment,
    set_threads,
    threads_in_force,
)
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.precision import Precision


class TensorFlowRuntime(InferenceRuntime):
    name = "tensorflow"
    module = "tensorflow"
    extra = "tensorflow"
    consumes = "tensorflow"
    modules = ("tensorflow",)
    precisions = {Precision.FP32: ("cpu", "cuda"), Precision.BF16: ("cpu", "cuda")}
    instead = dict.fromkeys((Precision.INT8, Precision.FP16), (
        "the tensorflow runtime runs fp32 and bf16 (Keras's mixed_bfloat16) here; int8 goes "
        "through onnxruntime or openvino, fp16 needs a GPU runtime"))
    user_file_precisions = (Precision.FP32,)  # your Keras file or SavedModel, as saved

    _precision = ""  # the served model's Keras dtype policy, once prepared

    def build_details(self, imported: Any) -> dict[str, Any]:
        return build.read(imported)

    def environment(self, settings: ParallelismSettings) -> dict[str, str]:
        return {**quiet_environment(), **library_environment(settings)}

    def load(self) -> None:
        self.tf = import_optional("tensorflow", extra=self.extra,
                                  purpose="The tensorflow runtime")
        self.tf.keras.utils.disable_interactive_logging()
        self._reference: np.ndarray | None = None

    def version(self) -> str:
        return str(self.tf.__version__)

    def threads_in_force(self) -> dict[str, Any]:
        """Its thread pools, and the served model's dtype policy (``mixed_bfloat16``)."""
        policy = {"inference_precision": self._precision} if self._precision else {}
        return {**threads_in_force(self.tf), **policy}

    def libraries_in_force(self) -> dict[str, Any]:
        return libraries_in_force(self.tf)

    def reference(self) -> np.ndarray | None:
        return self._reference

    def layout(self, x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1))

    def apply_threads(self, settings: ParallelismSettings) -> None:
        set_threads(self.tf, settings)

    def prepare(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        tf = self.tf
        if options.device == "cuda" and not tf.config.list_physical_devices("GPU"):
            raise ConfigError("device cuda requested, but TensorFlow sees no GPU here")
        if source.user is not None:
            return self._prepare_user(source, options)
        if source.run_id is not None:
            if source.trained_with != "tensorflow":
                raise ConfigError(f"run {source.run_id} was trained with {source.trained_with};"
                                  " the tensorflow runtime loads TensorFlow runs only")
            if source.model_dir is None:
                raise ConfigError(f"run {source.run_id} has no saved model (trained with "
                                  "-P log_model=false)")
            model = tf.keras.models.load_model(source.model_dir / "data" / "model.keras")
        else:
            from mlflow_dlaas.backends.tensorflow.training import build_keras

            tf.keras.utils.set_random_seed(0)
            model = build_keras(tf, source.spec, source.input_shape, source.num_classes)
            eager = model(tf.constant(self.layout(source.reference_inputs)), training=False)
            self._reference = np.asarray(eager)
        if options.precision is Precision.BF16:
            model = in_mixed_bfloat16(tf, model)
        compiled = tf.function(lambda x: tf.cast(model(x, training=False), tf.float32),
                               jit_compile=options.jit_compile)
        device = "/GPU:0" if options.device == "cuda" else "/CPU:0"
        self._precision = model.layers[-1].dtype_policy.name

        def predict(x: np.ndarray) -> np.ndarray:
            with tf.device(device):
                return compiled(tf.constant(x)).numpy()

        return predict

    def _prepare_user(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        """The user's Keras file or SavedModel on its named inputs, XLA as asked."""
        from mlflow_dlaas.backends.tensorflow.formats import first_output_tf, load_keras

        tf, user = self.tf, source.user
        assert user is not None
        call, _ = load_keras(tf, user.kind, user.path)
        compiled = tf.function(lambda x: call(**x), jit_compile=options.jit_compile)
        device = "/GPU:0" if options.device == "cuda" else "/CPU:0"

        def predict(x: Any) -> np.ndarray:
            with tf.device(device):
                return first_output_tf(compiled({k: tf.constant(a)
                                                 for k, a in x.arrays.items()}))

        return predict


def in_mixed_bfloat16(tf: Any, model: Any) -> Any:
    """``model`` with every layer under Keras's ``mixed_bfloat16`` policy (bf16 compute, its
    weights copied as they are), for serving in bf16."""
    def under_bf16(layer: Any) -> Any:
        return layer.__class__.from_config({**layer.get_config(), "dtype": "mixed_bfloat16"})

    clone = tf.keras.models.clone_model(model, clone_function=under_bf16)
    clone.set_weights(model.get_weights())
    return clone
