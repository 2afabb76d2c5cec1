"""Run each selected claim's study (resumable), then judge every claim on this host's runs."""

from __future__ import annotations

import dataclasses
import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlflow import MlflowClient

from mlflow_dlaas.backends import get_framework, get_runtime
from mlflow_dlaas.console_log import console
from mlflow_dlaas.errors import ConfigError, DlaasError, SourceUnavailable
from mlflow_dlaas.libraries.settings import library_file
from mlflow_dlaas.report.collect import collect_runs
from mlflow_dlaas.report.report import Workloads
from mlflow_dlaas.report.screening import counts_toward_winner, screen
from mlflow_dlaas.reproduce.claim_parts import NOT_MEASURABLE, NOT_SEPARABLE, ClaimVerdict
from mlflow_dlaas.reproduce.claim_verdicts import JUDGES
from mlflow_dlaas.reproduce.claims import Claim
from mlflow_dlaas.tuning.spec import StudySpec, load_spec

log = console(__name__)

#: The claims' study specs: inside an installed wheel, else the checkout's examples/reproduce.
PACKAGED_SPECS = Path(__file__).resolve().parent / "specs"
SPEC_DIR = (PACKAGED_SPECS if PACKAGED_SPECS.is_dir()
            else Path(__file__).resolve().parents[2] / "examples" / "reproduce")
#: what --quick promises on 2 cores
QUICK_LIMIT_MIN = 20
#: the Python modules each framework or runtime needs in this environment
PRELOADED = ("allocator", "openmp_runtime")


@dataclass(frozen=True)
class ClaimResult:
    """One claim's verdict and where its runs are."""

    claim: Claim
    verdict: ClaimVerdict
    study: str = ""  # the study that holds its runs
    experiment_id: str = ""
    notes: tuple[str, ...] = ()  # runs left out, and why
    valid_runs: int = 0  # the runs the tests counted


@dataclass(frozen=True)
class Step:
    """One study to run, and the claims judged on its runs."""

    spec: StudySpec
    claims: tuple[Claim, ...]
    minutes: float


def spec_path(claim: Claim, plan: str, specs: Path = SPEC_DIR) -> Path:
    """The claim's study spec for ``plan`` (quick or full) in the folder ``specs``."""
    path = specs / f"{claim.study}-{plan}.yaml"
    if not path.is_file():
        raise ConfigError(f"claim {claim.number}'s study spec {path} is missing; give --specs "
                          "the examples/reproduce/ folder of a checkout of mlflow-dlaas")
    return path


def claim_spec(claim: Claim, plan: str, experiment: str, specs: Path = SPEC_DIR) -> StudySpec:
    """The spec, in ``experiment``; a study of another experiment gets its own name, so that
    each experiment resumes its own studies."""
    spec = load_spec(spec_path(claim, plan, specs))
    if experiment == spec.experiment:
        return spec
    return dataclasses.replace(spec, name=f"{experiment}-{spec.name}"[:250],
                               experiment=experiment)


def unmeasurable(claim: Claim, spec: StudySpec) -> str | None:
    """Why this machine cannot measure the claim (a framework, library or energy counter
    missing), or None."""
    backend = get_framework if spec.entry_point == "train" else get_runtime
    missing = sorted({f"{name} (module {module})" for name in spec.frameworks
                      for module in backend(name).modules
                      if importlib.util.find_spec(module) is None})
    if missing:
        return f"a framework is missing: {', '.join(missing)} is not installed"
    for setting in PRELOADED:
        values = [spec.fixed.get(setting)] + [c for d in spec.search_space
                                              if d.name == setting for c in d.choices]
        for value in {str(v) for v in values if v not in (None, "", "default")}:
            try:
                library_file(setting, value)
            except ConfigError as e:
                return str(e)
    if claim.needs_energy:
        return energy_counter_missing()
    return None


def energy_counter_missing() -> str | None:
    """Why no energy counter is readable here (no RAPL package counter, no NVIDIA GPU)."""
    from mlflow_dlaas.hardware import nvidia_gpu_models
    from mlflow_dlaas.monitor.rapl import RaplSampler

    if nvidia_gpu_models():
        return None
    try:
        RaplSampler().open()
    except SourceUnavailable as e:
        return f"no energy counter: {e}; no NVIDIA GPU"
    return None


def plan_steps(claims: list[Claim], plan: str, experiment: str, specs: Path = SPEC_DIR
               ) -> tuple[list[Step], dict[int, ClaimVerdict]]:
    """The studies to run (one per spec, shared by the claims judged on it), and the verdicts
    known before measuring (not measurable here)."""
    steps: dict[str, Step] = {}
    known: dict[int, ClaimVerdict] = {}
    for claim in claims:
        spec = claim_spec(claim, plan, experiment, specs)
        reason = unmeasurable(claim, spec)
        if reason:
            known[claim.number] = ClaimVerdict(NOT_MEASURABLE, reason)
            continue
        found = steps.get(spec.name)
        minutes = claim.minutes.get(plan, 0.0)
        steps[spec.name] = Step(spec, (*found.claims, claim), found.minutes + minutes) if found \
            else Step(spec, (claim,), minutes)
    return list(steps.values()), known


def run_steps(steps: list[Step], say: Callable[[str], None]) -> dict[str, str]:
    """Run (or resume) each study; one line before and after each, with the time left.

    Returns the studies that failed, with the reason. The time left is the plan's estimate,
    scaled by how the steps that measured compared with theirs (a study resumed complete
    takes seconds and says nothing about the machine's speed).
    """
    from mlflow_dlaas.tuning.study import run_study

    failed: dict[str, str] = {}
    planned_done, spent = 0.0, 0.0
    for i, step in enumerate(steps, 1):
        left = sum(s.minutes for s in steps[i - 1:])
        scale = spent / planned_done if planned_done else 1.0
        claims = ", ".join(str(c.number) for c in step.claims)
        say(f"[step {i}/{len(steps)}] claim{'s' if len(step.claims) > 1 else ''} {claims}: "
            f"study {step.spec.name} (about {step.minutes * scale:.0f} min; about "
            f"{left * scale:.0f} min left)")
        started = time.monotonic()
        try:
            run_study(step.spec)
        except DlaasError as e:
            failed[step.spec.name] = str(e)
            say(f"[step {i}/{len(steps)}] study {step.spec.name} failed: {e}")
        took = (time.monotonic() - started) / 60
        if took >= step.minutes / 4:
            planned_done += step.minutes
            spent += took
        rest = sum(s.minutes for s in steps[i:]) * (spent / planned_done if planned_done else 1)
        say(f"[step {i}/{len(steps)}] done in {took:.1f} min; about {rest:.0f} min left")
    return failed


def judge(client: MlflowClient, claims: list[Claim], steps: list[Step],
          known: dict[int, ClaimVerdict], failed: dict[str, str], host: str, *,
          include_disturbed: bool = False) -> list[ClaimResult]:
    """Every claim's verdict: on its study's finished, valid runs of ``host`` (runs of any
    validity with ``include_disturbed``)."""
    by_claim = {c.number: s for s in steps for c in s.claims}
    results = []
    for claim in claims:
        if claim.number in known:
            results.append(ClaimResult(claim, known[claim.number]))
            continue
        spec = by_claim[claim.number].spec
        try:
            table = collect_runs(client, study=spec.name)
        except ConfigError:  # no trial run at all
            why = failed.get(spec.name, "the study has no runs yet")
            results.append(ClaimResult(claim, ClaimVerdict(NOT_SEPARABLE, f"no runs: {why}"),
                                       spec.name))
            continue
        finished = table.finished
        here = finished[finished["host"] == host] if len(finished) else finished
        counted = here[counts_toward_winner(here, include_disturbed=include_disturbed)] \
            if len(here) else here
        notes = screen(here, include_disturbed=include_disturbed).notes()
        if len(finished) > len(here):
            notes.append(f"{len(finished) - len(here)} runs of other hosts left out: a claim "
                         f"is judged on this host ({host}) only")
        if counted.empty:
            why = " ".join(notes) or failed.get(spec.name, "the study has no finished run")
            verdict = ClaimVerdict(NOT_SEPARABLE, f"no run of this host counts: {why}")
        else:
            verdict = JUDGES[claim.number](Workloads.of(counted))
        experiment = str(table.runs["experiment_id"].iloc[0]) if len(table.runs) else ""
        results.append(ClaimResult(claim, verdict, spec.name, experiment, tuple(notes),
                                   len(counted)))
    return results


def announce(plan: str, steps: list[Step], say: Callable[[str], None]) -> None:
    """What the plan runs and how long it should take, before it starts."""
    total = sum(s.minutes for s in steps)
    runs = sum((s.spec.n_trials or 0) * s.spec.replicates for s in steps)
    if plan == "quick":
        say(f"reproduce --quick: {_studies(steps)}, {runs} runs; fits in {QUICK_LIMIT_MIN} "
            f"minutes on 2 cores with the embedded data (about {total:.0f} min measured here; "
            "a rerun resumes where it stopped)")
    else:
        say(f"reproduce --full: {_studies(steps)}, {runs} runs; estimated {total:.0f} min "
            f"({total / 60:.1f} h) on 2 cores before it starts; a rerun resumes where it "
            "stopped")


def _studies(steps: list[Step]) -> str:
    return f"{len(steps)} stud{'y' if len(steps) == 1 else 'ies'}"


def stderr(line: str) -> None:
    log.info(f"mlflow-dlaas: {line}")
