"""A study's cells measured in interleaved rounds: a worker holds several trials at once and
runs replicate 0 of each, then replicate 1 of each, ..., each round in a seeded random order
(A C B, B A C, ...), so that a drift of the machine (warming up, another tenant's burst)
lands on every cell alike instead of on the cells measured last. The report's paired test
over interleaved rounds then applies to the study's cells too.

Only where the draws do not learn from the trials told before them: a grid, and a random
search with a trial count. TPE, NSGA-II and GP choose each point from the trials finished
before it; their replicates run back to back.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from mlflow_dlaas.console_log import console
from mlflow_dlaas.tuning.spec import StudySpec
from mlflow_dlaas.tuning.trial_in_flight import TrialInFlight

log = console(__name__)

#: the most trials one worker holds at once to interleave their replicates
MAX_INTERLEAVED = 16


def batch_size(spec: StudySpec) -> int:
    """How many trials a worker asks before it measures them in rounds (1: back to back)."""
    if spec.replicates < 2:
        return 1
    if spec.sampler == "grid" or (spec.sampler == "random" and spec.n_trials is not None):
        return MAX_INTERLEAVED
    return 1


def round_order(cells: Sequence[TrialInFlight], replicate: int, seed: int | None
                ) -> list[TrialInFlight]:
    """The cells in round ``replicate``'s order: shuffled, seeded by the study's seed, the
    first trial of the batch and the round (the same batch resumed runs in the same order)."""
    order = sorted(cells, key=lambda c: c.number)
    if not order:
        return order
    entropy = [seed or 0, order[0].number, replicate]
    random.Random(int(np.random.SeedSequence(entropy).generate_state(1)[0])).shuffle(order)
    return order


def measure_in_rounds(cells: Sequence[TrialInFlight], spec: StudySpec) -> None:
    """Every replicate of every cell, round by round; a cell pruned or failed in a round is
    left out of the later ones. Each child's wait beats every held trial's heartbeat."""
    for replicate in range(spec.replicates):
        active = [c for c in cells if c.state is None]

        def heartbeat(held: Sequence[TrialInFlight] = active) -> None:
            for cell in held:
                if cell.state is None:
                    cell.beat()

        order = round_order(active, replicate, spec.seed)
        for cell in order:
            cell.run_replicate(replicate, heartbeat)
        if len(cells) > 1:  # the trials' own lines come once every round has run
            ended = sum(c.state is not None for c in order)
            log.info(f"mlflow-dlaas: round {replicate + 1}/{spec.replicates} done: trials "
                     f"{', '.join(str(c.number) for c in order)} in this order"
                     + (f" ({ended} ended early)" if ended else ""))
