"""An experiment's or a study's runs as one pandas table, read with paged run searches."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from mlflow import MlflowClient
from mlflow.entities import Run, ViewType

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.report.hosts import UNKNOWN_HOST
from mlflow_dlaas.runs.goals import Bound, Goal, parse_asks
from mlflow_dlaas.runs.schema import (
    ACCURACY_TAG,
    DECIDE_MAX_ROUNDS_TAG,
    DECIDE_ROUND_TAG,
    DECIDE_SESSION_TAG,
    ENTRY_TAG,
    ENV_TAG_PREFIX,
    FRAMEWORK_TAG,
    HOST_CLASS_TAG,
    HOST_TAG,
    MODEL_SOURCE_TAG,
    ORPHANED_TAG,
    OUTAGE_TAG,
    PROJECT_TAG,
    REASON_TAG,
    REPLICATE_TAG,
    ROLE_TAG,
    RUNTIME_TAG,
    SKIPPED_TAG,
    STUDY_TAG,
    TRIAL_NUMBER_TAG,
    VALIDITY_REASON_TAG,
    VALIDITY_TAG,
    current_metrics,
)

PAGE_SIZE = 1000
#: runs that describe other runs, never measured themselves
NOT_MEASUREMENTS = ("report", "study", "decide")
#: the column saying "not measured (synthetic data)" where a run's labels were random
ACCURACY_COLUMN = "accuracy_note"
#: tags copied into the table as plain columns
TAG_COLUMNS = {ENTRY_TAG: "entry", FRAMEWORK_TAG: "framework",
               RUNTIME_TAG: "runtime", PROJECT_TAG: "project", STUDY_TAG: "study",
               TRIAL_NUMBER_TAG: "trial_number", REASON_TAG: "failure_reason",
               VALIDITY_TAG: "validity", VALIDITY_REASON_TAG: "validity_reason",
               HOST_TAG: "host", HOST_CLASS_TAG: "host_class",
               f"{ENV_TAG_PREFIX}cpu_model": "cpu_model",
               ACCURACY_TAG: ACCURACY_COLUMN, REPLICATE_TAG: "replicate",
               DECIDE_SESSION_TAG: "decide_session", DECIDE_ROUND_TAG: "decide_round",
               DECIDE_MAX_ROUNDS_TAG: "decide_max_rounds", OUTAGE_TAG: "store_outage",
               MODEL_SOURCE_TAG: "model_source"}


@dataclass(frozen=True)
class RunTable:
    """Every measured run of one scope: ``params.X``, ``metrics.X`` and info columns."""

    scope: str
    experiment_ids: tuple[str, ...]
    runs: pd.DataFrame
    status_counts: dict[str, int] = field(default_factory=dict)
    #: per study in scope, the points its machine skipped unmeasured, and why
    skipped: dict[str, str] = field(default_factory=dict)
    #: per study in scope, its objectives and constraints as its parent run logged them
    #: (``minimize:KEY,...`` and ``NAME OP VALUE; ...``)
    objectives: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def finished(self) -> pd.DataFrame:
        return self.runs[self.runs["status"] == "FINISHED"]

    def study_asks(self) -> dict[str, list[tuple[Goal, tuple[Bound, ...]]]]:
        """Each study's own objectives, each with its constraints, as questions."""
        return {study: asks_of(objectives, constraints)
                for study, (objectives, constraints) in self.objectives.items()}

    @property
    def failed(self) -> pd.DataFrame:
        """Runs that FAILED: an answer counts them against the configurations they tried."""
        return self.runs[self.runs["status"] == "FAILED"]


def collect_runs(client: MlflowClient, *, experiment: str | None = None,
                 study: str | None = None) -> RunTable:
    """The runs of ``experiment`` (by name) or of ``study`` (its trials, in any experiment)."""
    if (experiment is None) == (study is None):
        raise ConfigError("give exactly one of --experiment NAME or --study NAME")
    if experiment is not None:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            known = ", ".join(sorted(e.name for e in _experiments(client))) or "none"
            raise ConfigError(f"no experiment named {experiment!r}; experiments here: {known}")
        ids, query, scope = (found.experiment_id,), "", f"experiment {experiment}"
    else:
        ids = tuple(e.experiment_id for e in _experiments(client))
        query, scope = f"tags.`dlaas.study` = '{quoted(study)}'", f"study {study}"
    found_runs = _search(client, ids, query)
    parents = [r for r in found_runs if r.data.tags.get(ROLE_TAG) == "study"]
    skipped = {r.data.tags.get(STUDY_TAG, r.info.run_name): r.data.tags[SKIPPED_TAG]
               for r in parents if SKIPPED_TAG in r.data.tags}
    objectives = {r.data.tags.get(STUDY_TAG, r.info.run_name): (
        r.data.params.get("objectives", ""), r.data.params.get("constraints", ""))
        for r in parents if r.data.params.get("objectives")}
    runs = [r for r in found_runs
            if r.data.tags.get(ROLE_TAG) not in NOT_MEASUREMENTS
            and r.data.tags.get(ENTRY_TAG) not in NOT_MEASUREMENTS
            and r.data.tags.get(ORPHANED_TAG) != "true"]  # its trial's retry measured it
    if study is not None and not runs:
        raise ConfigError(f"no trial runs of study {study!r}; studies here: "
                          f"{', '.join(_study_names(client, ids)) or 'none'}")
    table = pd.DataFrame([_row(r) for r in runs])
    if table.empty:
        table = pd.DataFrame(columns=["run_id", "run_name", "status", "experiment_id",
                                      "start_time", "end_time", "entry", "system", "host",
                                      "validity"])
    counts = table["status"].value_counts().to_dict() if len(table) else {}
    return RunTable(scope, ids, table, {str(k): int(v) for k, v in counts.items()}, skipped,
                    objectives)


def asks_of(objectives: str, constraints: str) -> list[tuple[Goal, tuple[Bound, ...]]]:
    """A study's logged ``objectives`` (``minimize:KEY,...``) and ``constraints`` (``NAME OP
    VALUE; ...``) as questions, each objective with every constraint."""
    goals = tuple(f"{direction[:3]}:{metric}" for direction, _, metric in
                  (o.partition(":") for o in objectives.split(",") if o))
    bounds = tuple(c.strip() for c in constraints.split(";") if c.strip())
    return parse_asks(goals, bounds)


def _search(client: MlflowClient, experiment_ids: tuple[str, ...], query: str) -> list[Run]:
    runs: list[Run] = []
    token = None
    while True:
        page = client.search_runs(list(experiment_ids), query, ViewType.ACTIVE_ONLY,
                                  max_results=PAGE_SIZE, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _experiments(client: MlflowClient) -> list:
    found, token = [], None
    while True:
        page = client.search_experiments(max_results=PAGE_SIZE, page_token=token)
        found.extend(page)
        token = page.token
        if not token:
            return found


def _study_names(client: MlflowClient, ids: tuple[str, ...]) -> list[str]:
    parents = _search(client, ids, "tags.`dlaas.role` = 'study'")
    return sorted({r.data.tags.get(STUDY_TAG, "") for r in parents} - {""})


def quoted(value: str) -> str:
    return value.replace("'", "\\'")


def _row(run: Run) -> dict[str, object]:
    tags = run.data.tags
    row: dict[str, object] = {
        "run_id": run.info.run_id, "run_name": run.info.run_name, "status": run.info.status,
        "experiment_id": run.info.experiment_id, "start_time": run.info.start_time,
        "end_time": run.info.end_time,
    }
    row.update({column: tags.get(tag, "") for tag, column in TAG_COLUMNS.items()})
    row["entry"] = row["entry"] or "other"
    row["system"] = row["framework"] or row["runtime"] or row["project"] or ""
    row["host"] = row["host"] or UNKNOWN_HOST
    # a study's replicate index, else the seed: runs of one round share it (the demo's)
    row["replicate"] = row["replicate"] or run.data.params.get("seed", "")
    row.update({f"params.{k}": v for k, v in run.data.params.items()})
    row.update({f"metrics.{k}": v for k, v in current_metrics(run.data.metrics).items()})
    return row
