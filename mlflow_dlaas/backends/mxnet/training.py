"""Apache MXNet 1.9 (Gluon, hybridized). Lives in its own environment: numpy 1.23."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_dlaas._imports import import_optional
from mlflow_dlaas.backends.training import BuildOptions, FrameworkAdapter, StepStats, Trainer
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
    next_shape,
)
from mlflow_dlaas.parallelism import ParallelismSettings, process_settings_in_force

INSTALL_HINT = (
    "MXNet needs its own environment (mxnet==1.9.1 with numpy==1.23.5): run it through "
    "`mlflow run projects/mxnet -e train --env-manager virtualenv`"
)


class MXNetAdapter(FrameworkAdapter):
    """MXNet's engine reads its thread settings from the environment at import:
    ``inter_op_threads`` -> MXNET_CPU_WORKER_NTHREADS, ``intra_op_threads`` -> OMP_NUM_THREADS."""

    name = "mxnet"
    module = "mxnet"
    extra = "mxnet"
    env_manager = "virtualenv"  # MXNet needs numpy 1.23: its own environment
    native_library = "libmxnet"

    def environment(self, settings: ParallelismSettings) -> dict[str, str]:
        return {**thread_environment(settings), **onednn_environment(settings)}

    def libraries_in_force(self) -> dict[str, Any]:
        return libraries_in_force(self.mx)

    def load(self) -> None:
        self.mx = import_optional("mxnet", extra=self.extra, purpose="The mxnet framework",
                                  hint=INSTALL_HINT)

    def version(self) -> str:
        return str(self.mx.__version__)

    def configure_threads(self, settings: ParallelismSettings) -> None:
        """Nothing to call: :meth:`environment` set everything before import."""

    def threads_in_force(self) -> dict[str, Any]:
        return threads_in_force()

    def device_available(self, device: str) -> bool:
        return device == "cpu" or self.mx.context.num_gpus() > 0

    def build(self, spec: ArchitectureSpec, input_shape: tuple[int, int, int],
              num_classes: int, options: BuildOptions) -> Trainer:
        return MXNetTrainer(self.mx, spec, input_shape, num_classes, options)


def thread_environment(settings: ParallelismSettings) -> dict[str, str]:
    """MXNet reads its pools at import: worker threads and OpenMP."""
    env = {}
    if settings.inter_op_threads is not None:
        env["MXNET_CPU_WORKER_NTHREADS"] = str(settings.inter_op_threads)
    if settings.intra_op_threads is not None and settings.omp_threads is None:
        env["OMP_NUM_THREADS"] = str(settings.intra_op_threads)
    return env


def onednn_environment(settings: ParallelismSettings) -> dict[str, str]:
    """MXNet 1.x reads MXNET_MKLDNN_ENABLED (its oneDNN, formerly MKL-DNN) at import."""
    if settings.onednn == "default":
        return {}
    return {"MXNET_MKLDNN_ENABLED": "1" if settings.onednn == "on" else "0"}


def libraries_in_force(mx: Any) -> dict[str, Any]:
    """oneDNN: built in (MXNet's runtime features) and not switched off by the variable its
    engine read at import (MXNet has no call that reports it); every runtime feature."""
    features = mx.runtime.Features()
    built = features.is_enabled("MKLDNN")
    enabled = built and os.environ.get("MXNET_MKLDNN_ENABLED", "1") != "0"
    return {"onednn": "on" if enabled else "off",
            "features": sorted(name for name, f in features.items() if f.enabled)}


def threads_in_force() -> dict[str, Any]:
    """No read-back call exists: the operators' OpenMP threads by the engine's own rule
    (:func:`operator_threads`), the workers from the variable the engine read at import."""
    omp = [v for k, v in process_settings_in_force().items() if k.startswith("openmp_")]
    return {
        "intra_op_threads": operator_threads(os.environ, len(os.sched_getaffinity(0)),
                                             max(omp) if omp else None),
        "inter_op_threads": int(os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1")),
    }


def operator_threads(environ: Mapping[str, str], processors: int,
                     openmp_max: int | None) -> int:
    """The OpenMP threads MXNet 1.9's operators run on, as its engine decides at import
    (``src/engine/openmp.cc``): ``MXNET_OMP_MAX_THREADS`` where set; else, where
    ``OMP_NUM_THREADS`` is set, OpenMP's own maximum; else the processors this process may
    run on, halved on x86, where MXNet assumes two hyper-threads a core, even on a machine
    whose cores have one (a 2-core machine then trains on 1 thread; docs/performance.md has
    the cost). OpenMP's pool, read through
    threadpoolctl, still says the full count there: it is not what the operators use."""
    if environ.get("MXNET_OMP_MAX_THREADS"):
        return int(environ["MXNET_OMP_MAX_THREADS"])
    if environ.get("OMP_NUM_THREADS"):
        return openmp_max if openmp_max is not None else int(environ["OMP_NUM_THREADS"])
    halved = processors >> 1 if platform.machine().lower() in ("x86_64", "amd64", "i686") \
        else processors
    return max(halved, 1)


def build_gluon(mx: Any, spec: ArchitectureSpec, input_shape: tuple[int, int, int],
                num_classes: int) -> Any:
    """The spec as a Gluon HybridSequential (Glorot-uniform weights and zero biases once
    initialised)."""
    nn = mx.gluon.nn
    spec.shapes(input_shape, num_classes)  # a clear error for too small an input
    net = nn.HybridSequential()
    with net.name_scope():
        _add(mx, net, spec.resolved(num_classes), input_shape)
    return net


def _add(mx: Any, net: Any, layers: tuple[Layer, ...], shape: tuple[int, ...]) -> None:
    """Add the Gluon blocks of a stack from an input of ``shape`` to ``net``."""
    nn = mx.gluon.nn
    for layer in layers:
        activation = getattr(layer, "activation", "none")
        fused = activation in ("relu", "tanh") and isinstance(layer, Conv2D | Dense)
        act = activation if fused else None
        if isinstance(layer, Conv2D):
            net.add(nn.Conv2D(layer.filters, layer.kernel, layer.stride, layer.padding,
                              groups=layer.groups, use_bias=layer.bias, activation=act,
                              in_channels=shape[0]))
        elif isinstance(layer, BatchNorm):
            net.add(nn.BatchNorm(axis=1, momentum=0.9, epsilon=1e-5, in_channels=shape[0]))
        elif isinstance(layer, Pool2D):
            pool = nn.MaxPool2D if layer.kind == "max" else nn.AvgPool2D
            net.add(pool(layer.size, layer.stride, layer.padding))
        elif isinstance(layer, GlobalAvgPool):
            net.add(nn.GlobalAvgPool2D(), nn.Flatten())
        elif isinstance(layer, Flatten):
            net.add(nn.Flatten())
        elif isinstance(layer, Dense):
            net.add(nn.Dense(layer.units, activation=act, in_units=shape[0]))
        elif isinstance(layer, Dropout):
            net.add(nn.Dropout(layer.rate))
        elif isinstance(layer, Residual):
            net.add(_residual(mx, layer, shape))
        if activation != "none" and not fused:
            net.add(_activation(mx, activation))
        shape = next_shape(layer, shape)


def _activation(mx: Any, name: str) -> Any:
    nn = mx.gluon.nn
    if name == "relu6":
        return nn.HybridLambda(lambda F, x: F.clip(x, 0, 6))
    return nn.Activation(name)


def _residual(mx: Any, layer: Residual, shape: tuple[int, ...]) -> Any:
    """``body(x) + shortcut(x)`` as one hybrid block (the activation follows it)."""
    nn = mx.gluon.nn

    class ResidualBlock(nn.HybridBlock):
        def __init__(self) -> None:
            super().__init__()
            with self.name_scope():
                self.body = nn.HybridSequential()
                self.shortcut = nn.HybridSequential()
                _add(mx, self.body, layer.body, shape)
                _add(mx, self.shortcut, layer.shortcut, shape)

        def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803 - Gluon's name
            return self.body(x) + self.shortcut(x)

    return ResidualBlock()


class MXNetTrainer(Trainer):
    def __init__(self, mx: Any, spec: ArchitectureSpec, input_shape: tuple[int, int, int],
                 num_classes: int, options: BuildOptions) -> None:
        self.mx = mx
        mx.random.seed(options.seed)
        np.random.seed(options.seed)
        self.ctx = mx.gpu(0) if options.device == "cuda" else mx.cpu()
        self.net = build_gluon(mx, spec, input_shape, num_classes)
        self.net.initialize(mx.init.Xavier(rnd_type="uniform", factor_type="avg", magnitude=3),
                            ctx=self.ctx)
        if options.hybridize:
            self.net.hybridize(static_alloc=True, static_shape=True)
        settings = {"learning_rate": options.learning_rate, "wd": options.weight_decay}
        if options.optimizer == "sgd":
            settings["momentum"] = options.momentum
        else:
            settings["epsilon"] = 1e-8
        self.trainer = mx.gluon.Trainer(self.net.collect_params(), options.optimizer, settings)
        self.loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
        self.input_shape = input_shape

    def parameter_count(self) -> int:
        return int(sum(np.prod(p.shape) for p in self.net.collect_params().values()
                       if p.grad_req != "null"))

    def train_steps(self, x: np.ndarray, y: np.ndarray, batch_size: int,
                    max_steps: int | None = None) -> StepStats:
        mx = self.mx
        xs = mx.nd.array(x, ctx=self.ctx)
        ys = mx.nd.array(y, ctx=self.ctx, dtype="float32")
        loss_sum = mx.nd.zeros((1,), ctx=self.ctx)
        correct = mx.nd.zeros((1,), ctx=self.ctx)
        steps = samples = 0
        for start in range(0, len(x), batch_size):
            if max_steps is not None and steps >= max_steps:
                break
            xb, yb = xs[start : start + batch_size], ys[start : start + batch_size]
            with mx.autograd.record():
                logits = self.net(xb)
                loss = self.loss_fn(logits, yb)
            loss.backward()
            self.trainer.step(xb.shape[0])
            loss_sum += loss.sum()
            correct += (logits.argmax(axis=1) == yb).sum()
            steps += 1
            samples += xb.shape[0]
        # asscalar() waits for MXNet's asynchronous engine to finish the work
        return StepStats(float(loss_sum.asscalar()), int(correct.asscalar()), samples, steps)

    def predict(self, x: np.ndarray, batch_size: int) -> np.ndarray:
        mx = self.mx
        out = [self.net(mx.nd.array(x[i : i + batch_size], ctx=self.ctx)).asnumpy()
               for i in range(0, len(x), batch_size)]
        return np.concatenate(out)

    def save_model(self, directory: Path, example: np.ndarray) -> str:
        """MLflow has no MXNet flavor any more: the exported symbol and params."""
        self.predict(example[:1], 1)  # an exported hybrid graph needs one forward pass
        directory.mkdir(parents=True, exist_ok=True)
        self.net.export(str(directory / "model"))
        return "artifact (mxnet symbol + params)"

    def export_onnx(self, path: Path, example: np.ndarray) -> None:
        import tempfile

        try:
            import onnx  # noqa: F401 - mxnet.onnx needs it
        except ImportError as e:
            raise NotImplementedError("the onnx package is not in the MXNet environment") from e
        self.predict(example[:1], 1)
        with tempfile.TemporaryDirectory() as tmp:
            prefix = str(Path(tmp) / "model")
            self.net.export(prefix)
            self.mx.onnx.export_model(f"{prefix}-symbol.json", f"{prefix}-0000.params",
                                      [(1, *self.input_shape)], np.float32, str(path),
                                      dynamic=True, dynamic_input_shapes=[(None,
                                                                          *self.input_shape)])
