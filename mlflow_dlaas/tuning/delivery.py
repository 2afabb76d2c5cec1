"""Trials whose runs arrived late: run to their end while the tracking server did not answer,
then sent by ``mlflow-dlaas resend``. The next run of the study completes them."""

from __future__ import annotations

from collections.abc import Sequence

from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from mlflow_dlaas.tuning.trial_runner import ChildOutcome

#: set on a trial failed because the tracking server did not take its runs' results
UNDELIVERED_ATTR = "dlaas_undelivered"
#: set on the COMPLETE trial that holds such a trial's runs once they arrived: the failed
#: trial's number (the failed one counts toward n_trials, this one does not: they are one)
DELIVERED_FROM_ATTR = "dlaas_delivered_from"


def delivered_outcomes(client: MlflowClient, run_ids: Sequence[str], replicates: int
                       ) -> list[ChildOutcome] | None:
    """The trial's runs as outcomes where every replicate's run is on the server and
    FINISHED; None while one is missing, unfinished or unreadable."""
    if len(run_ids) != replicates:
        return None
    outcomes = []
    for run_id in run_ids:
        try:
            run = client.get_run(run_id)
        except MlflowException:
            return None
        if run.info.status != "FINISHED":
            return None
        outcomes.append(ChildOutcome(run_id, "FINISHED", dict(run.data.metrics)))
    return outcomes
