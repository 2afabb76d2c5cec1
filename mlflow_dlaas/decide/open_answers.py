"""The answers a report leaves open on this host, and the configurations behind them: the
leader and the next best it could not be told from."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from mlflow import MlflowClient

from mlflow_dlaas.report.collect import RunTable
from mlflow_dlaas.report.recommend import Recommendation
from mlflow_dlaas.report.report import Workloads, answer_questions
from mlflow_dlaas.report.screening import screen

#: an answer's verdicts that more rounds can settle (``part``: open, some settings decided)
OPEN = ("open", "part")
#: the entry points whose runs ``decide`` can launch again (``projects/<system>``)
LAUNCHABLE = ("train", "infer")


@dataclass(frozen=True)
class OpenAnswer:
    """One open answer: its words, and a run of each of the two configurations behind it."""

    question: str  # "lowest train_time (...) · study demo · train · lenet5 on mnist5k"
    sentence: str
    leader: str  # run id: the latest run of the leading configuration
    rival: str  # run id: the latest run of the next best
    #: run ids: the latest run of every configuration not yet told from the leader (the next
    #: best's first)
    contenders: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answers:
    """Every answer on one host, and the open ones ``decide`` can measure more of."""

    all: tuple[Recommendation, ...]
    open: tuple[OpenAnswer, ...]
    #: open answers it cannot measure more of, each with why
    left: tuple[str, ...]
    #: runs left out and why (disturbed ones, unless included)
    notes: tuple[str, ...] = ()


def question_of(answer: Recommendation) -> str:
    """The question an answer is for, the same before and after more rounds."""
    return " · ".join(p for p in (answer.wanted(), answer.workload) if p)


def answers_on(client: MlflowClient, table: RunTable, host: str, *,
               include_disturbed: bool = False) -> Answers:
    """The report's answers over ``host``'s runs, and those still open."""
    screened = screen(table.finished, include_disturbed=include_disturbed)
    kept = screened.kept
    mine = kept[kept["host"] == host] if len(kept) else kept
    work = Workloads.of(mine)
    found, _ = answer_questions(client, work, table.study_asks(), [], "", include_disturbed,
                                table.failed)
    runs = table.runs.set_index("run_id")
    open_ones, left = [], []
    for answer in found:
        if answer.verdict not in OPEN or not answer.rival_run_ids:
            continue
        leader = _latest(runs, [e.run_id for e in answer.evidence] or [])
        rival = _latest(runs, list(answer.rival_run_ids))
        contenders = tuple(r for r in dict.fromkeys(
            [rival, *(_latest(runs, list(ids)) for ids in answer.contender_run_ids)]) if r)
        entries = {str(runs.loc[r, "entry"]) for r in (leader, *contenders) if r}
        if not leader or not rival or not entries <= set(LAUNCHABLE):
            left.append(f"{question_of(answer)}: its runs are not of projects/<framework> "
                        "(train, infer); measure more with a study's replicates")
            continue
        open_ones.append(OpenAnswer(question_of(answer), answer.sentence(), leader, rival,
                                    contenders))
    return Answers(tuple(found), tuple(open_ones), tuple(left), tuple(screened.notes()))


def _latest(runs: pd.DataFrame, run_ids: list[str]) -> str:
    """The latest-started of ``run_ids`` in ``runs`` (indexed by run id); '' for none."""
    known = [r for r in run_ids if r in runs.index]
    if not known:
        return ""
    return str(runs.loc[known, "start_time"].astype(float).idxmax())
