"""PyTorch: eager training, optional channels_last memory format."""

from __future__ import annotations

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
from mlflow_dlaas.parallelism import ParallelismSettings
from mlflow_dlaas.precision import Precision


class PyTorchAdapter(FrameworkAdapter):
    name = "pytorch"
    module = "torch"
    extra = "torch"
    native_library = "libtorch_cpu"
    precisions = (Precision.FP32, Precision.BF16)
    modules = ("torch",)

    def load(self) -> None:
        self.torch = import_optional("torch", extra=self.extra, purpose="The pytorch framework")

    def version(self) -> str:
        return str(self.torch.__version__)

    def configure_threads(self, settings: ParallelismSettings) -> None:
        set_threads(self.torch, settings)

    def threads_in_force(self) -> dict[str, Any]:
        return threads_in_force(self.torch)

    def libraries_in_force(self) -> dict[str, Any]:
        return libraries_in_force(self.torch)

    def device_available(self, device: str) -> bool:
        return device == "cpu" or (device == "cuda" and self.torch.cuda.is_available())

    def build(self, spec: ArchitectureSpec, input_shape: tuple[int, int, int],
              num_classes: int, options: BuildOptions) -> Trainer:
        return PyTorchTrainer(self.torch, spec, input_shape, num_classes, options)


def set_threads(torch: Any, settings: ParallelismSettings) -> None:
    """PyTorch's intra-op pool (also its OpenMP), inter-op pool (settable once) and its
    oneDNN switch (``torch.backends.mkldnn.enabled``)."""
    if settings.onednn != "default":
        if settings.onednn == "on" and not torch.backends.mkldnn.is_available():
            raise ConfigError("onednn=on: this PyTorch build has no oneDNN (mkldnn)")
        torch.backends.mkldnn.enabled = settings.onednn == "on"
    if settings.intra_op_threads is not None:
        torch.set_num_threads(settings.intra_op_threads)
    if settings.inter_op_threads is not None:
        torch.set_num_interop_threads(settings.inter_op_threads)


def libraries_in_force(torch: Any) -> dict[str, Any]:
    """oneDNN as PyTorch will use it, and its own parallel report."""
    mkldnn = torch.backends.mkldnn
    return {"onednn": "on" if mkldnn.is_available() and mkldnn.enabled else "off",
            "parallel_info": torch.__config__.parallel_info()}


def threads_in_force(torch: Any) -> dict[str, Any]:
    return {"intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads()}


def build_module(torch: Any, spec: ArchitectureSpec, input_shape: tuple[int, int, int],
                 num_classes: int) -> Any:
    """The spec as a ``torch.nn.Sequential`` with Glorot-uniform weights and zero biases."""
    nn = torch.nn
    spec.shapes(input_shape, num_classes)  # a clear error for too small an input
    module = nn.Sequential(*_modules(nn, spec.resolved(num_classes), input_shape))
    for m in module.modules():
        if isinstance(m, nn.Conv2d | nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    return module


def _modules(nn: Any, layers: tuple[Layer, ...], shape: tuple[int, ...]) -> list[Any]:
    """PyTorch modules for a stack of layers from an input of ``shape``."""
    modules: list[Any] = []
    for layer in layers:
        if isinstance(layer, Conv2D):
            modules.append(nn.Conv2d(shape[0], layer.filters, layer.kernel, layer.stride,
                                     layer.padding, groups=layer.groups, bias=layer.bias))
        elif isinstance(layer, BatchNorm):
            modules.append(nn.BatchNorm2d(shape[0]))
        elif isinstance(layer, Pool2D):
            pool = nn.MaxPool2d if layer.kind == "max" else nn.AvgPool2d
            modules.append(pool(layer.size, layer.stride, layer.padding))
        elif isinstance(layer, GlobalAvgPool):
            modules += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        elif isinstance(layer, Flatten):
            modules.append(nn.Flatten())
        elif isinstance(layer, Dense):
            modules.append(nn.Linear(shape[0], layer.units))
        elif isinstance(layer, Dropout):
            modules.append(nn.Dropout(layer.rate))
        elif isinstance(layer, Residual):
            modules.append(_residual(nn, layer, shape))
        modules.extend(_activation(nn, getattr(layer, "activation", "none")))
        shape = next_shape(layer, shape)
    return modules


def _residual(nn: Any, layer: Residual, shape: tuple[int, ...]) -> Any:
    """``activation(body(x) + shortcut(x))`` as one module (the activation follows it)."""

    class ResidualBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(*_modules(nn, layer.body, shape))
            self.shortcut = nn.Sequential(*_modules(nn, layer.shortcut, shape))

        def forward(self, x: Any) -> Any:
            return self.body(x) + self.shortcut(x)

    return ResidualBlock()


def _activation(nn: Any, name: str) -> list[Any]:
    return {"relu": [nn.ReLU()], "relu6": [nn.ReLU6()], "tanh": [nn.Tanh()], "none": []}[name]


class PyTorchTrainer(Trainer):
    def __init__(self, torch: Any, spec: ArchitectureSpec, input_shape: tuple[int, int, int],
                 num_classes: int, options: BuildOptions) -> None:
        self.torch = torch
        torch.manual_seed(options.seed)
        self.device = torch.device(options.device)
        fmt = torch.channels_last if options.channels_last else torch.contiguous_format
        self.memory_format = fmt
        self.model = build_module(torch, spec, input_shape, num_classes).to(self.device)
        if options.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        params = self.model.parameters()
        if options.optimizer == "sgd":
            self.optimizer = torch.optim.SGD(params, lr=options.learning_rate,
                                             momentum=options.momentum,
                                             weight_decay=options.weight_decay)
        else:
            self.optimizer = torch.optim.Adam(params, lr=options.learning_rate, eps=1e-8,
                                              weight_decay=options.weight_decay)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        # bf16: autocast runs convolutions and matrix products in bf16 and keeps the weights,
        # the loss and the optimizer in fp32 (no loss scaling: bf16 has fp32's range)
        self.autocast = options.precision == Precision.BF16

    def precision_in_force(self) -> str:
        return "bf16 autocast" if self.autocast else "fp32"

    def _autocast(self) -> Any:
        return self.torch.autocast(self.device.type, dtype=self.torch.bfloat16,
                                   enabled=self.autocast)

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def _tensor(self, x: np.ndarray) -> Any:
        t = self.torch.from_numpy(x).to(self.device)
        return t.contiguous(memory_format=self.memory_format) if t.dim() == 4 else t

    def train_steps(self, x: np.ndarray, y: np.ndarray, batch_size: int,
                    max_steps: int | None = None) -> StepStats:
        torch = self.torch
        self.model.train()
        xs, ys = self._tensor(x), torch.from_numpy(y).to(self.device)
        loss_sum = torch.zeros((), device=self.device)
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        steps = samples = 0
        for start in range(0, len(x), batch_size):
            if max_steps is not None and steps >= max_steps:
                break
            xb, yb = xs[start : start + batch_size], ys[start : start + batch_size]
            self.optimizer.zero_grad(set_to_none=True)
            with self._autocast():
                logits = self.model(xb)
                loss = self.loss_fn(logits, yb)  # batch mean, as the textbook loop
            loss.backward()
            self.optimizer.step()
            loss_sum += loss.detach() * len(yb)
            correct += (logits.detach().argmax(1) == yb).sum()
            steps += 1
            samples += len(yb)
        # .item() waits for the device, so the caller's clock reads finished work
        return StepStats(float(loss_sum.item()), int(correct.item()), samples, steps)

    def predict(self, x: np.ndarray, batch_size: int) -> np.ndarray:
        torch = self.torch
        self.model.eval()
        out = []
        with torch.inference_mode(), self._autocast():
            for start in range(0, len(x), batch_size):
                logits = self.model(self._tensor(x[start : start + batch_size]))
                out.append(logits.float().cpu())
        return torch.cat(out).numpy()

    def save_model(self, directory: Path, example: np.ndarray) -> str:
        import mlflow.pytorch

        # pickle keeps an nn.Module (pt2 would load as a torch.export program, no .eval())
        mlflow.pytorch.save_model(self.model.cpu(), str(directory),
                                  input_example=example[:1], serialization_format="pickle",
                                  pip_requirements=[pinned_requirement("torch")])
        self.model.to(self.device)
        return "mlflow.pytorch"

    def export_onnx(self, path: Path, example: np.ndarray) -> None:
        torch = self.torch
        model = self.model.cpu().eval()
        sample = torch.from_numpy(example[:1])
        torch.onnx.export(model, (sample,), str(path), input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "batch"}},
                          dynamo=False)
        self.model.to(self.device)
