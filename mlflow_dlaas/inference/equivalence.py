"""Before any timing: does the runtime reproduce the source framework's outputs?"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlflow_dlaas.errors import WorkloadError
from mlflow_dlaas.runs.schema import (
    EQUIVALENCE_MAX_ABS_ERROR,
    EQUIVALENCE_MAX_RELATIVE_ERROR,
    EQUIVALENCE_MEAN_RELATIVE_ERROR,
    EQUIVALENCE_TOP1_AGREEMENT,
)

#: Reduced precision is judged on agreement, not on digits: the largest output deviation
#: (over max |ref|) each precision may show, and the top-1 agreement every one must reach.
#: int8's deviation is wider (a static QDQ LeNet-5 deviated by 0.30 with every top-1 kept).
REDUCED_MAX_RELATIVE_ERROR = {"bf16": 0.25, "fp16": 0.25, "int8": 0.5}
REDUCED_MIN_TOP1_AGREEMENT = 0.75


@dataclass(frozen=True)
class Equivalence:
    max_abs_error: float
    max_relative_error: float  # max |out - ref| / max |ref|
    top1_agreement: float
    passed: bool
    rule: str
    mean_relative_error: float = 0.0  # mean |out - ref| / max |ref|

    def metrics(self) -> dict[str, float]:
        return {EQUIVALENCE_MAX_ABS_ERROR: self.max_abs_error,
                EQUIVALENCE_MAX_RELATIVE_ERROR: self.max_relative_error,
                EQUIVALENCE_MEAN_RELATIVE_ERROR: self.mean_relative_error,
                EQUIVALENCE_TOP1_AGREEMENT: self.top1_agreement}


def compare(outputs: np.ndarray, reference: np.ndarray, *, precision: str, rtol: float,
            atol: float) -> Equivalence:
    """fp32: every output within ``atol + rtol * |ref|``; bf16 / fp16 / int8: relative error
    and top-1 agreement within the reduced-precision bounds (the accuracy such a precision
    costs is these figures, logged with every run)."""
    if outputs.shape != reference.shape:
        raise WorkloadError(f"output shape {outputs.shape} differs from the source "
                            f"framework's {reference.shape}")
    diff = np.abs(outputs.astype(np.float64) - reference.astype(np.float64))
    if diff.size == 0:
        raise WorkloadError("the model returned no outputs to compare")
    scale = float(np.abs(reference).max()) or 1.0
    n = len(reference)  # top-1 over each sample's outputs, whatever their shape
    agreement = (float((outputs.reshape(n, -1).argmax(1) == reference.reshape(n, -1).argmax(1))
                       .mean()) if reference.ndim > 1 and n else float(diff.max() == 0))
    if precision == "fp32":
        passed = bool(np.all(diff <= atol + rtol * np.abs(reference)))
        rule = f"|out - ref| <= {atol} + {rtol} * |ref| everywhere"
    else:
        bound = REDUCED_MAX_RELATIVE_ERROR[precision]
        passed = (float(diff.max()) / scale <= bound
                  and agreement >= REDUCED_MIN_TOP1_AGREEMENT)
        rule = (f"{precision}: max error <= {bound} of max |ref| and top-1 agreement >= "
                f"{REDUCED_MIN_TOP1_AGREEMENT}")
    return Equivalence(float(diff.max()), float(diff.max()) / scale, agreement, passed, rule,
                       float(diff.mean()) / scale)


def require(result: Equivalence, runtime: str, reference_framework: str) -> None:
    if not result.passed:
        raise WorkloadError(
            f"{runtime} does not reproduce {reference_framework}'s outputs: max abs error "
            f"{result.max_abs_error:.3g}, max relative error {result.max_relative_error:.3g}, "
            f"top-1 agreement {result.top1_agreement:.2f} (rule: {result.rule})")
