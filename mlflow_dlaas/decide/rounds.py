"""One round of ``decide``: each configuration involved runs once, in a seeded random order
recorded on its run, as a child of the session's run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from mlflow import MlflowClient

from mlflow_dlaas.config import TrainConfig, accepted_params
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.project_paths import project_dir
from mlflow_dlaas.runs.schema import (
    DECIDE_MAX_ROUNDS_TAG,
    DECIDE_ORDER_TAG,
    DECIDE_ROUND_TAG,
    DECIDE_SESSION_TAG,
    ENTRY_TAG,
    FRAMEWORK_TAG,
    RUNTIME_TAG,
    STUDY_TAG,
    TRIAL_NAME_TAG,
)
from mlflow_dlaas.tuning.trial_runner import ChildOutcome, run_child

#: each entry point's config: the params it takes
CONFIGS: dict[str, type] = {"train": TrainConfig, "infer": InferConfig}
#: MLflow's tag for the environment manager a project run used (absent: local)
PROJECT_ENV_TAG = "mlflow.project.env"
#: a round's run may take this many times its template's duration, plus the slack, at most
TIMEOUT_FACTOR, TIMEOUT_SLACK_S = 4.0, 180.0
#: the seed each round's runs share (paired: both sides of a round see the same one)
ROUND_SEED_BASE = 10_000


@dataclass(frozen=True)
class Template:
    """A configuration to run again: its project, entry point, params and environment."""

    run_id: str
    name: str  # "pytorch train", for the console
    project: str
    entry_point: str
    params: dict[str, str]
    env_manager: str
    experiment_id: str
    study: str
    seconds: float  # how long the template run took

    @classmethod
    def of(cls, client: MlflowClient, run_id: str) -> Template:
        """The template a finished run gives: its declared params as it logged them."""
        run = client.get_run(run_id)
        tags = run.data.tags
        system = tags.get(FRAMEWORK_TAG) or tags.get(RUNTIME_TAG) or ""
        entry = tags.get(ENTRY_TAG, "")
        project = str(project_dir(system))
        accepted = accepted_params(CONFIGS[entry]) - {"framework", "runtime"}
        params = {k: v for k, v in run.data.params.items() if k in accepted and v != ""}
        seconds = ((run.info.end_time or run.info.start_time) - run.info.start_time) / 1000
        return cls(run_id, f"{system} {entry}", project,
                   entry, params, tags.get(PROJECT_ENV_TAG, "local"), run.info.experiment_id,
                   tags.get(STUDY_TAG, ""), seconds)


def named(templates: list[Template]) -> list[str]:
    """Each template by its system, entry point and the params that tell it from the others:
    ``pytorch train (intra_op_threads=2)``."""
    names = []
    for template in templates:
        differing = [f"{k}={v}" for k, v in sorted(template.params.items()) if k != "seed"
                     and any(t.params.get(k) != v for t in templates)]
        names.append(template.name + (f" ({', '.join(differing)})" if differing else ""))
    return names


def order_of(templates: list[Template], seed: int, round_number: int) -> list[Template]:
    """The round's order: a permutation drawn from the session's seed and the round."""
    rng = np.random.default_rng([seed, round_number])
    return [templates[i] for i in rng.permutation(len(templates))]


def run_round(templates: list[Template], *, session: str, round_number: int, max_rounds: int,
              seed: int) -> list[ChildOutcome]:
    """Run each template once, in the round's seeded order, as children of ``session``; each
    run records its session, round, place in the order and the round's shared seed."""
    ordered = order_of(templates, seed, round_number)
    outcomes = []
    for place, template in enumerate(ordered, start=1):
        params = dict(template.params)
        if "seed" in params:
            params["seed"] = str(ROUND_SEED_BASE + round_number)
        tags = {DECIDE_SESSION_TAG: session, DECIDE_ROUND_TAG: str(round_number),
                DECIDE_MAX_ROUNDS_TAG: str(max_rounds),
                DECIDE_ORDER_TAG: f"{place} of {len(ordered)} (seed {seed}, round {round_number})",
                TRIAL_NAME_TAG: f"decide-r{round_number}-{place}"}
        if template.study:
            tags[STUDY_TAG] = template.study
        outcomes.append(run_child(
            experiment_id=template.experiment_id, parent_run_id=session,
            project_uri=template.project, entry_point=template.entry_point, params=params,
            tags=tags, env_manager=template.env_manager,
            timeout_s=TIMEOUT_FACTOR * template.seconds + TIMEOUT_SLACK_S))
    return outcomes
