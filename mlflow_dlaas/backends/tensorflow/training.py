"""TensorFlow (Keras 3 layers, a compiled train step), optional XLA ``jit_compile``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas._imports import import_optional
from mlflow_dlaas.backends.training import (
    BuildOptions,
    FrameworkAdapter,
    StepStats,
    Trainer,
    pinned_requirement,
)
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.libraries.settings import POLICY_VARIABLES
from mlflow_dlaas.models.spec import (
    ArchitectureSpec,
    BatchNorm,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool,
    Layer,
    Pool2D,
    Residual,
)
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.precision import Precision


class TensorFlowAdapter(FrameworkAdapter):
    name = "tensorflow"
    module = "tensorflow"
    extra = "tensorflow"
    precisions = (Precision.FP32, Precision.BF16)
    modules = ("tensorflow",)

    def load(self) -> None:
        self.tf = import_optional("tensorflow", extra=self.extra,
                                  purpose="The tensorflow framework")
        self.tf.keras.utils.disable_interactive_logging()  # no progress bars in run logs

    def version(self) -> str:
        return str(self.tf.__version__)

    def environment(self, settings: ParallelismSettings) -> dict[str, str]:
        return {**quiet_environment(), **library_environment(settings)}

    def libraries_in_force(self) -> dict[str, Any]:
        return libraries_in_force(self.tf)

    def configure_threads(self, settings: ParallelismSettings) -> None:
        set_threads(self.tf, settings)

    def threads_in_force(self) -> dict[str, Any]:
        return threads_in_force(self.tf)

    def device_available(self, device: str) -> bool:
        return device == "cpu" or bool(self.tf.config.list_physical_devices("GPU"))

    def build(self, spec: ArchitectureSpec, input_shape: tuple[int, int, int],
              num_classes: int, options: BuildOptions) -> Trainer:
        return TensorFlowTrainer(self.tf, spec, input_shape, num_classes, options)


def quiet_environment() -> dict[str, str]:
    """TensorFlow's C++ logging down to warnings, unless the user chose otherwise."""
    return {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}


def library_environment(settings: ParallelismSettings) -> dict[str, str]:
    """oneDNN through TF_ENABLE_ONEDNN_OPTS; OpenMP settings refused: TensorFlow's kernels
    run on its own (Eigen) thread pools, and its oneDNN is built on them, not on OpenMP."""
    openmp = [name for name in ("openmp_runtime", *POLICY_VARIABLES)
              if getattr(settings, name) not in ("", "default")]
    if openmp:
        raise ConfigError(f"{', '.join(openmp)}: TensorFlow uses no OpenMP (its kernels and "
                          "its oneDNN run on its own thread pools), so there is nothing to "
                          "switch; leave them unset for tensorflow, use intra_op_threads / "
                          "inter_op_threads")
    if settings.onednn == "default":
        return {}
    return {"TF_ENABLE_ONEDNN_OPTS": "1" if settings.onednn == "on" else "0"}


def libraries_in_force(tf: Any) -> dict[str, Any]:
    """oneDNN as TensorFlow's runtime reports it (IsMklEnabled reads the build and
    TF_ENABLE_ONEDNN_OPTS), and its build information."""
    from tensorflow.python.util import _pywrap_util_port

    return {"onednn": "on" if _pywrap_util_port.IsMklEnabled() else "off",
            "build_info": dict(tf.sysconfig.get_build_info())}


def set_threads(tf: Any, settings: ParallelismSettings) -> None:
    threading = tf.config.threading
    if settings.intra_op_threads is not None:
        threading.set_intra_op_parallelism_threads(settings.intra_op_threads)
    if settings.inter_op_threads is not None:
        threading.set_inter_op_parallelism_threads(settings.inter_op_threads)


def threads_in_force(tf: Any) -> dict[str, Any]:
    """As TensorFlow reports them; 0 means "its default: one per core"."""
    threading = tf.config.threading
    return {"intra_op_threads": threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": threading.get_inter_op_parallelism_threads()}


#: Keras's dtype policy per training precision: bf16 computes in bf16, keeps fp32 weights.
KERAS_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16"}


def build_keras(tf: Any, spec: ArchitectureSpec, input_shape: tuple[int, int, int],
                num_classes: int, precision: str = "fp32") -> Any:
    """The spec as a Keras functional model, channels-last (TensorFlow's CPU convolution
    layout), Glorot-uniform weights and zero biases, its layers under ``precision``'s dtype
    policy; the logits always fp32 (a softmax and loss in bf16 would lose the small
    probabilities)."""
    keras = tf.keras
    spec.shapes(input_shape, num_classes)  # a clear error for too small an input
    c, h, w = input_shape
    policy = keras.mixed_precision.Policy(KERAS_POLICIES[precision])
    inputs = keras.Input((h, w, c))
    outputs = _apply(keras, spec.resolved(num_classes), inputs, policy)
    if policy.compute_dtype != "float32":
        outputs = keras.layers.Activation("linear", dtype="float32")(outputs)
    return keras.Model(inputs, outputs, name=spec.name)


def _same_is_symmetric(conv: Conv2D) -> bool:
    """Whether Keras's ``padding="same"`` pads ``conv`` exactly as its symmetric zero padding
    does (stride 1, an odd kernel, padding half of it). There the convolution pads inside its
    kernel; a ZeroPadding2D layer would keep a padded copy of its input for the backward
    pass (about 140 MiB for ResNet-50 at batch 16)."""
    return conv.stride == 1 and conv.kernel % 2 == 1 and conv.padding == conv.kernel // 2


def _apply(keras: Any, layers: tuple[Layer, ...], x: Any, policy: Any) -> Any:
    """The Keras layers of a stack under the dtype ``policy``, applied to the tensor ``x``."""
    typed = {"dtype": policy}
    init = {"kernel_initializer": "glorot_uniform", "bias_initializer": "zeros", **typed}
    for layer in layers:
        activation = getattr(layer, "activation", "none")
        fused = {"activation": None if activation == "none" else activation}
        same = isinstance(layer, Conv2D) and _same_is_symmetric(layer)
        if isinstance(layer, Conv2D | Pool2D) and layer.padding and not same:
            x = keras.layers.ZeroPadding2D(layer.padding, **typed)(x)
        padding = "same" if same else "valid"
        if isinstance(layer, Conv2D):
            depthwise = layer.groups > 1 and layer.groups == layer.filters == x.shape[-1]
            if layer.groups > 1 and not depthwise:
                raise ConfigError("grouped convolutions other than depthwise have no Keras "
                                  "CPU kernel; use groups equal to the channels")
            conv = (keras.layers.DepthwiseConv2D(layer.kernel, layer.stride, padding,
                                                 use_bias=layer.bias,
                                                 depthwise_initializer="glorot_uniform",
                                                 bias_initializer="zeros", **typed, **fused)
                    if depthwise else
                    keras.layers.Conv2D(layer.filters, layer.kernel, layer.stride, padding,
                                        use_bias=layer.bias, **init, **fused))
            x = conv(x)
        elif isinstance(layer, BatchNorm):
            x = keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5, **typed)(x)
        elif isinstance(layer, Pool2D):
            pool = (keras.layers.MaxPooling2D if layer.kind == "max"
                    else keras.layers.AveragePooling2D)
            x = pool(layer.size, layer.stride, **typed)(x)
        elif isinstance(layer, GlobalAvgPool):
            x = keras.layers.GlobalAveragePooling2D(**typed)(x)
        elif isinstance(layer, Flatten):
            x = keras.layers.Flatten(**typed)(x)
        elif isinstance(layer, Dense):
            x = keras.layers.Dense(layer.units, **init, **fused)(x)
        elif isinstance(layer, Dropout):
            x = keras.layers.Dropout(layer.rate, **typed)(x)
        elif isinstance(layer, Residual):
            x = keras.layers.Add(**typed)([_apply(keras, layer.body, x, policy),
                                           _apply(keras, layer.shortcut, x, policy)])
        if isinstance(layer, BatchNorm | Residual) and activation != "none":
            x = keras.layers.Activation(activation, **typed)(x)
    return x


class TensorFlowTrainer(Trainer):
    def __init__(self, tf: Any, spec: ArchitectureSpec, input_shape: tuple[int, int, int],
                 num_classes: int, options: BuildOptions) -> None:
        self.tf = tf
        tf.keras.utils.set_random_seed(options.seed)
        self.device_name = "/GPU:0" if options.device == "cuda" else "/CPU:0"
        with tf.device(self.device_name):
            self.model = build_keras(tf, spec, input_shape, num_classes, options.precision)
        if options.optimizer == "sgd":
            self.optimizer = tf.keras.optimizers.SGD(options.learning_rate,
                                                     momentum=options.momentum)
        else:
            self.optimizer = tf.keras.optimizers.Adam(options.learning_rate, epsilon=1e-8)
        weight_decay = options.weight_decay
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="sum")
        model, optimizer = self.model, self.optimizer

        self._loss_sum = tf.Variable(0.0, trainable=False)
        self._correct = tf.Variable(0, dtype=tf.int64, trainable=False)
        loss_sum, correct_sum = self._loss_sum, self._correct

        def step(xs: Any, ys: Any, start: Any, size: Any) -> None:
            # slicing and the running totals stay inside the compiled step: no eager op
            # per batch (they cost the adapter ~10 % against a textbook loop)
            x, y = xs[start : start + size], ys[start : start + size]
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = loss_fn(y, logits)
                objective = loss / tf.cast(tf.shape(y)[0], loss.dtype)
                if weight_decay:  # coupled L2, as PyTorch's and MXNet's weight_decay
                    objective += 0.5 * weight_decay * tf.add_n(
                        [tf.reduce_sum(tf.square(v)) for v in model.trainable_variables])
            grads = tape.gradient(objective, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            loss_sum.assign_add(loss)
            correct_sum.assign_add(tf.reduce_sum(tf.cast(tf.argmax(logits, 1) == y, tf.int64)))

        self._step = tf.function(step, jit_compile=options.jit_compile)
        self._infer = tf.function(lambda x: model(x, training=False),
                                  jit_compile=options.jit_compile)

    def precision_in_force(self) -> str:
        """The dtype policy of the model's first computing layer, as Keras reports it."""
        return str(self.model.layers[1].dtype_policy.name)

    def parameter_count(self) -> int:
        return int(sum(np.prod(v.shape) for v in self.model.trainable_variables))

    def _nhwc(self, x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1))

    def train_steps(self, x: np.ndarray, y: np.ndarray, batch_size: int,
                    max_steps: int | None = None) -> StepStats:
        tf = self.tf
        with tf.device(self.device_name):
            xs, ys = tf.constant(self._nhwc(x)), tf.constant(y)
            self._loss_sum.assign(0.0)
            self._correct.assign(0)
            size = tf.constant(batch_size)
            steps = samples = 0
            for start in range(0, len(x), batch_size):
                if max_steps is not None and steps >= max_steps:
                    break
                self._step(xs, ys, tf.constant(start), size)
                steps += 1
                samples += min(batch_size, len(x) - start)
            return StepStats(float(self._loss_sum.numpy()), int(self._correct.numpy()),
                             samples, steps)

    def predict(self, x: np.ndarray, batch_size: int) -> np.ndarray:
        tf = self.tf
        xs = self._nhwc(x)
        with tf.device(self.device_name):
            out = [self._infer(tf.constant(xs[i : i + batch_size])).numpy()
                   for i in range(0, len(xs), batch_size)]
        return np.concatenate(out)

    def save_model(self, directory: Path, example: np.ndarray) -> str:
        import mlflow.tensorflow

        requirement = pinned_requirement("tensorflow", "tensorflow-cpu", "tensorflow-gpu")
        mlflow.tensorflow.save_model(self.model, str(directory),
                                     input_example=self._nhwc(example[:1]),
                                     pip_requirements=[requirement])
        return "mlflow.tensorflow"

    def export_onnx(self, path: Path, example: np.ndarray) -> None:
        try:
            self.model.export(str(path), format="onnx")
        except Exception as e:  # Keras needs tf2onnx, which has no release for this TF
            raise NotImplementedError(f"Keras ONNX export failed: {type(e).__name__}: {e}") from e
