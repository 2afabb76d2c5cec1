"""What ``mlflow-dlaas decide`` does, below the CLI: find the open answers on this host, run
rounds of only the configurations behind them until each is decided or the budget is spent
(a look after every round, by :mod:`mlflow_dlaas.sequential`), and say where each stands."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pandas as pd
from mlflow import MlflowClient
from mlflow.entities import Param
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NOTE as NOTE_TAG

from mlflow_dlaas.console_log import console
from mlflow_dlaas.decide.open_answers import Answers, OpenAnswer, answers_on, question_of
from mlflow_dlaas.decide.rounds import Template, named, run_round
from mlflow_dlaas.environment import this_host
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.measured_process.lifeline import stop_on_signals
from mlflow_dlaas.report.collect import collect_runs
from mlflow_dlaas.report.command import refuse_nothing_to_compare
from mlflow_dlaas.runs.schema import ENTRY_TAG, ROLE_TAG
from mlflow_dlaas.sequential import Budget, SequentialRule
from mlflow_dlaas.store.interrupted_writes import release_interrupted_statements
from mlflow_dlaas.store.ownership import owner_tags
from mlflow_dlaas.store.run_ending import end_run
from mlflow_dlaas.store.tracking import configure_tracking

log = console(__name__)


@dataclass(frozen=True)
class Outcome:
    """Where each answer that was open stands after the session."""

    session: str | None  # the decide run; None when nothing was measured
    rounds: int
    lines: tuple[str, ...]
    still_open: int


def decide(*, experiment: str, budget: Budget, seed: int = 0, dry_run: bool = False,
           include_disturbed: bool = False) -> Outcome:
    """Measure more of the configurations behind ``experiment``'s open answers on this host."""
    with stop_on_signals(escalate=True) as stop:
        configure_tracking(say_where=False)
        client = MlflowClient()
        table = collect_runs(client, experiment=experiment)
        refuse_nothing_to_compare(table)
        host = _this_host_of(table.finished)
        found = answers_on(client, table, host, include_disturbed=include_disturbed)
        rule = SequentialRule(budget.rounds)
        say(f"decide: {len(found.open)} open of {len(found.all)} answers on this host; rule: "
            f"{rule.describe()}")
        for line in found.left:
            say(f"  left open: {line}")
        for note in found.notes:
            say(f"  note: {note}")
        if dry_run or not found.open:
            return Outcome(None, 0, tuple(a.sentence for a in found.open), len(found.open))
        asked = {a.question for a in found.open}
        _templates(client, found.open)  # a run that cannot be launched again: said before any
        session = _session_run(client, table.runs, experiment, budget, seed, found.open)
        rounds, started, round_s = 0, time.monotonic(), 0.0
        try:
            while found.open and rounds < budget.rounds and \
                    time_for_a_round(budget, started, rounds, round_s):
                stop.check()
                rounds += 1
                round_started = time.monotonic()
                templates = _templates(client, found.open)
                say(f"round {rounds} of at most {budget.rounds}: "
                    + "; ".join(named(templates)))
                outcomes = run_round(templates, session=session, round_number=rounds,
                                     max_rounds=budget.rounds, seed=seed)
                for outcome in outcomes:
                    if outcome.status != "FINISHED":
                        say(f"  run {outcome.run_id} {outcome.status}: {outcome.reason}")
                round_s = time.monotonic() - round_started
                table = collect_runs(client, experiment=experiment)
                found = _still_open(answers_on(client, table, host,
                                               include_disturbed=include_disturbed), asked)
        except BaseException as e:
            release_interrupted_statements(e)
            end_run(client, session, "KILLED", f"decide stopped: {type(e).__name__}: {e}")
            raise
        final = answers_on(client, table, host, include_disturbed=include_disturbed)
        lines = tuple(a.sentence() for a in final.all if question_of(a) in asked)
        still = sum(1 for a in final.all if question_of(a) in asked and a.verdict == "open")
        client.set_tag(session, NOTE_TAG, f"decide: {rounds} rounds; {len(asked) - still} of "
                                          f"{len(asked)} open answers decided")
        client.set_terminated(session, "FINISHED")
        return Outcome(session, rounds, lines, still)


def say(line: str) -> None:
    log.info(f"mlflow-dlaas: {line}")


def _this_host_of(finished: pd.DataFrame) -> str:
    """This machine's host hash, where it measured runs of the experiment; ConfigError
    where it measured none (``decide`` measures here, so only this host's answers)."""
    here = this_host()
    hosts = sorted(set(finished["host"])) if len(finished) else []
    if here not in hosts:
        raise ConfigError(f"this machine (host {here}) measured none of the experiment's "
                          f"runs (hosts: {', '.join(hosts) or 'none'}); decide measures more "
                          "on the machine whose answers are open: run it there")
    return here


def _session_run(client: MlflowClient, runs: pd.DataFrame, experiment: str, budget: Budget,
                 seed: int, open_answers: tuple[OpenAnswer, ...]) -> str:
    """The session's run (role ``decide``, never a measurement): its budget and seed."""
    experiment_id = str(runs["experiment_id"].mode().iloc[0])
    run = client.create_run(experiment_id, run_name="decide", tags={
        ROLE_TAG: "decide", ENTRY_TAG: "decide", **owner_tags()})
    params = {"max_rounds": str(budget.rounds), "seed": str(seed),
              "minutes": "" if budget.minutes is None else f"{budget.minutes:g}",
              "open_answers": str(len(open_answers)), "experiment": experiment}
    client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in params.items()])
    return run.info.run_id


def _templates(client: MlflowClient, open_answers: tuple[OpenAnswer, ...]) -> list[Template]:
    """One template per configuration behind the open answers (a configuration behind
    several answers runs once a round)."""
    found: dict[str, Template] = {}
    for answer in open_answers:
        for run_id in (answer.leader, *(answer.contenders or (answer.rival,))):
            template = Template.of(client, run_id)
            settings = sorted((k, v) for k, v in template.params.items() if k != "seed")
            found.setdefault(f"{template.project} {template.entry_point} {settings}", template)
    return list(found.values())


def _still_open(found: Answers, asked: set[str]) -> Answers:
    """``found`` with only the answers that were open when the session began."""
    return Answers(found.all, tuple(a for a in found.open if a.question in asked), found.left,
                   found.notes)


def time_for_a_round(budget: Budget, started: float, rounds: int, round_s: float) -> bool:
    """Whether another round, as long as the last (``round_s``), ends within the budget's
    minutes; the first always starts."""
    if budget.minutes is None or rounds == 0:
        return True
    return time.monotonic() - started + round_s <= budget.minutes * 60
