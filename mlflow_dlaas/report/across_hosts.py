"""Which machine: the hosts of a report set side by side, per question and workload, never
pooled. Each host's own best configuration (its section's answer) and figure; the best
host's runs against the next host's, with the report's ratio, 95 % interval and verdict; and
the fingerprint differences that may explain the gap."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import pandas as pd
from mlflow import MlflowClient

from mlflow_dlaas.figures import significant
from mlflow_dlaas.report.cost import Prices, cost_text
from mlflow_dlaas.report.effect import Effect, compare_runs
from mlflow_dlaas.report.questions import is_accuracy
from mlflow_dlaas.report.recommend import Recommendation
from mlflow_dlaas.runs.schema import MEMORY_BANDWIDTH, PEAK_GFLOPS

#: a fleet study's host class in an answer's workload label (``study s@amd-2c-1a2b3c · ...``)
FLEET_SUFFIX = re.compile(r"^(study [^ ]+?)@[A-Za-z0-9._-]+")
#: the fingerprint entries set side by side, as a person names them
FINGERPRINT_ENTRIES = {"cpu_model": "CPU", "cpu_affinity_cores": "cores allowed",
                       "cpu_logical_cores": "logical cores", "memory_gib": "memory (GiB)"}
#: the measured ceilings, medians over a host's runs
CEILINGS = {PEAK_GFLOPS: "measured peak (GFLOP/s)",
            MEMORY_BANDWIDTH: "memory bandwidth (GB/s)"}


@dataclass(frozen=True)
class HostBest:
    """One host's own answer to a question: its best recipe and figure."""

    host: str
    answer: Recommendation
    #: what its answer costs at the host class's price (:mod:`~mlflow_dlaas.report.cost`)
    cost: str = ""

    @property
    def typical(self) -> float:
        values = self.answer.best_values
        return float(np.exp(np.mean(np.log(values)))) if values else math.nan


@dataclass(frozen=True)
class MachineAnswer:
    """A question asked of every host: the hosts best first, and the first two compared."""

    question: str
    hosts: tuple[HostBest, ...]
    effect: Effect | None

    def sentence(self) -> str:
        """``amd-epyc-2c-…, 1.1 s (...); ahead of amd-epyc-1c-… by 40 % (...)``: the best host
        and its figure, against the next (the question is shown beside it)."""
        best = self.hosts[0]
        text = f"{best.host}, {best.answer.value}"
        if self.effect is not None:
            text += f"; {self.effect.words(rival=self.hosts[1].host)}"
        return text

    def lines(self) -> list[str]:
        """Each host's own best recipe and figure, the best host first."""
        return [f"{h.host}: {h.answer.winner()}, {h.answer.value}"
                + (f"; {h.cost}" if h.cost else "") for h in self.hosts]


@dataclass(frozen=True)
class WhichMachine:
    """The hosts side by side: an answer per question all of them answered, and how their
    fingerprints differ."""

    answers: tuple[MachineAnswer, ...]
    differences: tuple[str, ...]
    #: where the prices behind the costs come from, and when ('' without prices)
    prices: str = ""
    #: accuracy on each host, one line per question: a check, not a choice of machine
    checks: tuple[str, ...] = ()


def which_machine(client: MlflowClient, answers_by_host: Mapping[str, Sequence[Recommendation]],
                  runs_by_host: Mapping[str, pd.DataFrame], prices: Prices | None = None
                  ) -> WhichMachine | None:
    """The hosts side by side where the report has two or more; None where it has one."""
    if len(answers_by_host) < 2:
        return None
    asked: dict[str, list[HostBest]] = {}
    for host, answers in answers_by_host.items():
        price = prices.usd_per_hour.get(host) if prices is not None else None
        for answer in answers:
            if answer.found and answer.best_values:
                cost = cost_text(answer.goal.metric, answer.best_values, price) if price else ""
                asked.setdefault(_question(answer), []).append(HostBest(host, answer, cost))
    found, checks = [], []
    for question, bests in asked.items():
        if len(bests) < 2:
            continue
        if is_accuracy(bests[0].answer.goal):  # the same model and data: a check, no choice
            checks.append(f"{question}: " + ", ".join(
                f"{b.host} {b.answer.value}" for b in bests)
                + " (a check: a host is not chosen for accuracy)")
            continue
        lower = bests[0].answer.goal.direction == "minimize"
        bests.sort(key=lambda b: b.typical if lower else -b.typical)
        effect = compare_runs(bests[0].answer.best_values, bests[1].answer.best_values,
                              lower_is_better=lower)
        found.append(MachineAnswer(question, tuple(bests), effect))
    return WhichMachine(tuple(found), tuple(fingerprint_differences(client, runs_by_host)),
                        prices.cited if prices is not None else "", tuple(checks))


def _question(answer: Recommendation) -> str:
    """The question as every host asks it: a fleet study's host class taken out."""
    workload = FLEET_SUFFIX.sub(r"\1", answer.workload)
    return " · ".join(p for p in (answer.wanted(), workload) if p)


def fingerprint_differences(client: MlflowClient, runs_by_host: Mapping[str, pd.DataFrame]
                            ) -> list[str]:
    """``cores allowed: a 1, b 2`` for each fingerprint entry, measured ceiling, ISA flag
    set and library version that differs between the hosts."""
    prints = {host: _fingerprint(client, runs) for host, runs in runs_by_host.items()}
    lines = []
    for key, name in FINGERPRINT_ENTRIES.items():
        _differs(lines, name, {h: p.get(key) for h, p in prints.items()})
    for key, name in CEILINGS.items():
        _differs(lines, name, {h: _median(runs, f"metrics.{key}")
                               for h, runs in runs_by_host.items()})
    flags = {h: set(str(p.get("cpu_flags") or "").split(",")) - {""} for h, p in prints.items()}
    everywhere = set.intersection(*flags.values()) if flags else set()
    if any(f - everywhere for f in flags.values()):
        lines.append("ISA flags only on some hosts: " + "; ".join(
            f"{h}: {', '.join(sorted(f - everywhere)) or 'none of them'}"
            for h, f in flags.items()))
    versions = sorted({k for p in prints.values() for k in p if k.endswith("_version")})
    for key in versions:
        _differs(lines, key.removesuffix("_version"), {h: p.get(key) for h, p in prints.items()})
    return lines


def _differs(lines: list[str], name: str, values: Mapping[str, object]) -> None:
    shown = {h: significant(v) if isinstance(v, float) else str(v) for h, v in values.items()
             if v is not None and not (isinstance(v, float) and math.isnan(v))}
    if len(set(shown.values())) > 1:
        lines.append(f"{name}: " + ", ".join(f"{h} {v}" for h, v in shown.items()))


def _median(runs: pd.DataFrame, column: str) -> float | None:
    if column not in runs:
        return None
    values = pd.to_numeric(runs[column], errors="coerce").dropna()
    return float(values.median()) if len(values) else None


def _fingerprint(client: MlflowClient, runs: pd.DataFrame) -> dict[str, object]:
    """The fingerprint one of the host's runs kept (``environment/fingerprint.json``),
    memory in whole GiB; {} where none of its first few runs kept one."""
    for run_id in list(runs["run_id"])[:3] if "run_id" in runs else []:
        with TemporaryDirectory() as folder:
            try:
                path = client.download_artifacts(run_id, "environment/fingerprint.json",
                                                 folder)
                data = json.loads(Path(path).read_text())
            except Exception:  # a run without one (a monitor run): the next
                continue
        data["memory_gib"] = round((data.get("memory_total_bytes") or 0) / 2**30)
        return data
    return {}
