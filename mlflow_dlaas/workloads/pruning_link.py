"""Pruning inside the trial: the entry process reports each epoch to the Optuna storage and
learns the pruner's decision at once, before the worker starts the next epoch.

The study driver passes where the trial lives (storage URL, study name, trial id, pruner, the
metric pruned on) in one environment variable, never in params or tags: a storage URL may
carry a password. The entry process takes the variable out of its environment before the
measured worker starts, so the worker neither sees it nor imports Optuna. The storage is
opened once the worker has started (importing Optuna and opening an RDB storage takes
seconds, while the worker imports its framework), in this process's main thread: importing
Optuna in a second thread while the main one imports MLflow raced on SQLAlchemy's modules
("partially initialized module 'sqlalchemy.util'") and failed the trial.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mlflow_dlaas.errors import DlaasError, WorkloadError
from mlflow_dlaas.runs.schema import PRUNED_TAG

#: The driver's message to a trial's entry process (JSON).
PRUNING_ENV = "DLAAS_PRUNING"


def pruning_environment(*, storage_url: str, study_name: str, trial_id: int, pruner: str,
                        metric: str) -> dict[str, str]:
    """The environment that links a trial's entry process to its Optuna trial."""
    return {PRUNING_ENV: json.dumps({"storage": storage_url, "study": study_name,
                                     "trial_id": trial_id, "pruner": pruner,
                                     "metric": metric})}


@dataclass
class PruningLink:
    """One Optuna trial, as seen from its entry process."""

    link: Mapping[str, Any]  # the driver's message
    metric: str
    pruner: str
    _trial: Any = field(default=None, repr=False)  # the optuna.Trial, once opened

    @classmethod
    def from_environment(cls) -> PruningLink | None:
        """The link the driver asked for (the variable removed), not yet opened; or None."""
        raw = os.environ.pop(PRUNING_ENV, None)
        if not raw:
            return None
        link = json.loads(raw)
        return cls(link, link["metric"], link["pruner"])

    def open(self) -> None:
        """Open the trial in its storage (call it in the main thread, after the worker
        started); a storage or study that cannot be opened is a :class:`WorkloadError`."""
        if self._trial is not None:
            return
        try:
            self._trial = _open_trial(self.link)
        except DlaasError:
            raise
        except Exception as e:  # the study's storage: a vendor error, said once here
            raise WorkloadError(f"cannot open trial {self.link['trial_id']} of study "
                                f"{self.link['study']!r} for pruning: {e}") from e

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
        return (f"pruned after epoch {step} by the study's {self.pruner} pruner "
                f"({self.metric} {value:.4g})")


def _open_trial(link: Mapping[str, Any]) -> Any:
    """The trial ``link`` names, in a study with the driver's pruner."""
    import optuna

    from mlflow_dlaas.optuna_access.pruners import make_pruner
    from mlflow_dlaas.optuna_access.storage import make_storage

    storage, _ = make_storage(link["storage"])
    # a sampler that leaves the trial alone (the driver's samples it)
    study = optuna.load_study(study_name=link["study"], storage=storage,
                              sampler=optuna.samplers.RandomSampler(),
                              pruner=make_pruner(link["pruner"]))
    return optuna.Trial(study, int(link["trial_id"]))
