"""The least memory a training step needs, from the model spec: checked before a run starts,
so that a batch that cannot fit is refused with the figure instead of ending in the kernel's
out-of-memory kill minutes later."""

from __future__ import annotations

from dataclasses import dataclass

from mlflow_dlaas.models.spec import ArchitectureSpec

FLOAT32_BYTES = 4
#: Values an optimizer keeps per parameter: SGD's momentum buffer, Adam's two moments.
OPTIMIZER_STATES = {"sgd": 1, "adam": 2}


@dataclass(frozen=True)
class TrainingMemory:
    """A lower bound of one training step's memory, in bytes, by part."""

    parameters: int  # weights, their gradients and the optimizer's state
    activations: int  # every layer's output for the batch, held for the backward pass

    @property
    def total(self) -> int:
        return self.parameters + self.activations

    def describe(self) -> str:
        mib = 2**20
        return (f"{self.total / mib:,.0f} MiB (weights, gradients and optimizer state "
                f"{self.parameters / mib:,.0f} MiB, activations {self.activations / mib:,.0f} "
                "MiB), before the framework's own memory and the data")


def training_memory(spec: ArchitectureSpec, input_shape: tuple[int, int, int], classes: int,
                    batch_size: int, optimizer: str) -> TrainingMemory:
    """The least a training step of ``spec`` at ``batch_size`` holds: frameworks keep more
    (normalisation buffers, workspace), never less."""
    per_parameter = 2 + OPTIMIZER_STATES.get(optimizer, 0)
    parameters = spec.parameter_count(input_shape, classes) * per_parameter * FLOAT32_BYTES
    activations = spec.activation_elements(input_shape, classes) * batch_size * FLOAT32_BYTES
    return TrainingMemory(parameters, activations)
