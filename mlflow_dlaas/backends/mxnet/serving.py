"""MXNet, hybridized (static graph), in its own environment."""

from __future__ import annotations

from typing import Any

import numpy as np

from mlflow_dlaas._imports import import_optional
from mlflow_dlaas.backends.mxnet import build
from mlflow_dlaas.backends.mxnet.training import (
    INSTALL_HINT,
    libraries_in_force,
    onednn_environment,
    thread_environment,
    threads_in_force,
)
from mlflow_dlaas.backends.served_model import ModelSource, Predictor
from mlflow_dlaas.backends.serving import InferenceOptions, InferenceRuntime
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.precision import Precision


class MXNetRuntime(InferenceRuntime):
    name = "mxnet"
    module = "mxnet"
    extra = "mxnet"
    consumes = "mxnet"
    env_manager = "virtualenv"  # MXNet needs numpy 1.23: its own environment
    precisions = {Precision.FP32: ("cpu",)}
    instead = dict.fromkeys(Precision, "the mxnet runtime runs fp32 on the CPU here")
    native_library = "libmxnet"

    def build_details(self, imported: Any) -> dict[str, Any]:
        return build.read(imported)

    def environment(self, settings: ParallelismSettings) -> dict[str, str]:
        return {**thread_environment(settings), **onednn_environment(settings)}

    def load(self) -> None:
        self.mx = import_optional("mxnet", extra=self.extra, purpose="The mxnet runtime",
                                  hint=INSTALL_HINT)
        self._reference: np.ndarray | None = None

    def version(self) -> str:
        return str(self.mx.__version__)

    def threads_in_force(self) -> dict[str, Any]:
        return threads_in_force()

    def libraries_in_force(self) -> dict[str, Any]:
        return libraries_in_force(self.mx)

    def reference(self) -> np.ndarray | None:
        return self._reference

    def prepare(self, source: ModelSource, options: InferenceOptions) -> Predictor:
        mx = self.mx
        if source.run_id is not None:
            if source.trained_with != "mxnet":
                raise ConfigError(f"run {source.run_id} was trained with {source.trained_with};"
                                  " the mxnet runtime loads MXNet runs only")
            if source.model_dir is None:
                raise ConfigError(f"run {source.run_id} has no saved model (trained with "
                                  "-P log_model=false)")
            local = source.model_dir
            net = mx.gluon.SymbolBlock.imports(str(local / "model-symbol.json"), ["data"],
                                               str(local / "model-0000.params"))
        else:
            from mlflow_dlaas.backends.mxnet.training import build_gluon

            mx.random.seed(0)
            net = build_gluon(mx, source.spec, source.input_shape, source.num_classes)
            net.initialize(mx.init.Xavier(rnd_type="uniform", factor_type="avg", magnitude=3))
            self._reference = net(mx.nd.array(source.reference_inputs)).asnumpy()  # imperative
        net.hybridize(static_alloc=True, static_shape=True)

        def predict(x: np.ndarray) -> np.ndarray:
            return net(mx.nd.array(x)).asnumpy()  # asnumpy waits for the engine

        return predict
