"""A study's one parent run in MLflow: made by the worker that created the study (or the
``mlflow run . -e study`` run it runs under), found by every other worker, claimed by the
one that runs now."""

from __future__ import annotations

import os
import time

import mlflow
import optuna
from mlflow.entities import Param

from mlflow_dlaas.errors import StoreMismatchError
from mlflow_dlaas.optuna_access.internals import storage_of
from mlflow_dlaas.redaction import redact_uri
from mlflow_dlaas.runs.schema import ENTRY_TAG, HOST_CLASS_TAG, ROLE_TAG, STUDY_TAG
from mlflow_dlaas.store.lifecycle import set_shared_tags
from mlflow_dlaas.store.ownership import owner_tags
from mlflow_dlaas.tuning.spec import StudySpec

#: The study's attribute naming its parent run.
PARENT_ATTR = "mlflow_parent_run_id"
#: How long a worker that did not create the study waits for its creator's parent run.
PARENT_WAIT_S = 60.0


def parent_run(study: optuna.Study, spec: StudySpec, experiment_id: str, created: bool) -> str:
    """The study's one parent run: made by the worker that created the study, found by others."""
    deadline = time.monotonic() + PARENT_WAIT_S
    while not created and time.monotonic() < deadline:
        existing = study.user_attrs.get(PARENT_ATTR)
        if existing:
            return held_by_tracking(existing, spec)
        time.sleep(0.5)
        study = optuna.load_study(study_name=spec.name, storage=storage_of(study))
    client = mlflow.MlflowClient()
    tags = {ROLE_TAG: "study", STUDY_TAG: spec.name, ENTRY_TAG: "study",
            **({HOST_CLASS_TAG: spec.host_class} if spec.host_class else {})}
    launcher = os.environ.get("MLFLOW_RUN_ID")  # under `mlflow run . -e study`: that run
    if launcher:
        run = client.get_run(launcher)
        for key, value in tags.items():
            client.set_tag(launcher, key, value)
    else:
        run = client.create_run(experiment_id, run_name=spec.name, tags={**tags, **owner_tags()})
    params = {"study_name": spec.name, "frameworks": ",".join(spec.frameworks),
              **({"project": redact_uri(spec.project)} if spec.project else {}),
              "entry_point": spec.entry_point, "sampler": spec.sampler, "pruner": spec.pruner,
              "n_trials": spec.n_trials, "timeout_s": spec.timeout_s,
              "replicates": spec.replicates, "replicate_seeds": spec.replicate_seeds,
              "env_manager": spec.env_manager,
              "objectives": ",".join(f"{o.direction}:{o.metric}" for o in spec.objectives),
              "constraints": "; ".join(b.text for b in spec.constraints)}
    params.update({f"fixed.{k}": v for k, v in spec.fixed.items()})
    client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()])
    study.set_user_attr(PARENT_ATTR, run.info.run_id)
    return run.info.run_id


def held_by_tracking(parent_id: str, spec: StudySpec) -> str:
    """``parent_id``, once the tracking store is seen to hold it."""
    from mlflow.exceptions import MlflowException

    try:
        mlflow.MlflowClient().get_run(parent_id)
    except MlflowException as e:
        if e.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        raise StoreMismatchError(
            f"study {spec.name!r} records its parent run {parent_id}, which the tracking store "
            f"{redact_uri(mlflow.get_tracking_uri())} does not hold (deleted, or another "
            "store); point MLFLOW_TRACKING_URI at the store the study began in, or start "
            "afresh: give the study a new name, or remove its storage (--storage, default "
            "./optuna.db)") from None
    return parent_id


def claim_parent(parent_id: str) -> None:
    """The parent run is RUNNING and owned by this worker (the last one to claim it)."""
    client = mlflow.MlflowClient()
    set_shared_tags(client, parent_id, owner_tags())
    client.update_run(parent_id, status="RUNNING")
