"""Pruning inside the trial: the entry process reports each epoch to the Optuna storage and
learns the pruner's decision at once, before the worker starts the next epoch.

The study driver says which trial in a :class:`~mlflow_dlaas.optuna_access.pruning_request.
PruningRequest`, taken out of this process's environment before the measured worker starts,
so the worker neither sees it nor imports Optuna. The trial is opened once the worker has
started (importing Optuna and opening an RDB storage takes seconds, while the worker imports
its framework), in this process's main thread, never beside another thread's imports of
MLflow (both import SQLAlchemy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mlflow_dlaas.errors import DlaasError, WorkloadError
from mlflow_dlaas.optuna_access.pruning_request import PruningRequest
from mlflow_dlaas.runs.schema import PRUNED_TAG


@dataclass
class PruningLink:
    """One Optuna trial, as seen from its entry process."""

    request: PruningRequest
    _trial: Any = field(default=None, repr=False)  # the optuna.Trial, once opened

    @property
    def metric(self) -> str:
        return self.request.metric

    @classmethod
    def from_environment(cls) -> PruningLink | None:
        """The link the driver asked for (the variable removed), not yet opened; or None."""
        request = PruningRequest.take_from_environment()
        return cls(request) if request is not None else None

    def open(self) -> None:
        """Open the trial in its storage (call it in the main thread, after the worker
        started); a storage or study that cannot be opened is a :class:`WorkloadError`."""
        if self._trial is not None:
            return
        try:
            self._trial = self.request.open_trial()
        except DlaasError:
            raise
        except Exception as e:  # the study's storage: a vendor error, said once here
            raise WorkloadError(f"cannot open trial {self.request.trial_id} of study "
                                f"{self.request.study!r} for pruning: {e}") from e

    def check(self, step: int, metrics: Mapping[str, float]) -> str | None:
        """Report the epoch's value; None to go on, or why the trial is pruned (the run is
        then tagged :data:`PRUNED_TAG`)."""
        value = metrics.get(self.metric)
        if value is None:
            return None
        self.open()
        trial = self._trial
        trial.report(float(value), step)
        if not trial.should_prune():
            return None
        import mlflow

        mlflow.set_tag(PRUNED_TAG, "true")
        return (f"pruned after epoch {step} by the study's {self.request.pruner} pruner "
                f"({self.metric} {value:.4g})")
