"""What a study would run, checked before anything runs: ``mlflow-dlaas study --dry-run``.

The plan reads only the spec, the projects' own files and this environment: it creates no
run, study, store or file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from importlib import metadata

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from mlflow_dlaas.decidable import ALPHA, fewest_runs_per_side
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference.text_model import TEXT_MODELS
from mlflow_dlaas.libraries.settings import library_file
from mlflow_dlaas.project_paths import project_dir
from mlflow_dlaas.redaction import redact_uri
from mlflow_dlaas.tuning.interleaving import batch_size
from mlflow_dlaas.tuning.measurable import (
    refuse_if_nothing_measurable,
    skipped_lines,
    skipped_settings,
)
from mlflow_dlaas.tuning.sampling import grid_space
from mlflow_dlaas.tuning.spec import Dimension, StudySpec

#: Seconds a trial's run costs beyond its work, per environment manager: the framework's
#: start-up (PyTorch about 2 s here, TensorFlow more) and about 1 s of ours, as measured by
#: ``benchmarks/trial_overhead.py`` (docs/performance.md); a first virtualenv run also
#: builds its environment once (1 to 5 minutes).
STARTUP_S = {"local": 3.0, "virtualenv": 3.5, "uv": 3.5}
#: the settings that preload a shared library, whose files must be here
PRELOADED = ("openmp_runtime", "allocator")


@dataclass(frozen=True)
class StudyPlan:
    """The trials, runs and requirements of a study, known before it starts."""

    spec: StudySpec
    trials: int | None  # None: as many as fit in timeout_s
    grid_points: int | None  # the grid's size, for the grid sampler
    libraries: tuple[str, ...]  # "setting=choice: file" for each preloaded library
    packages: tuple[str, ...]  # "project: requirement (installed version)" under local
    #: "skipped here: precision=bf16 (1 of 3 points): why" for each setting this machine
    #: cannot measure as meant
    skipped: tuple[str, ...] = ()
    skipped_points: int = 0  # grid points skipped here, which make no run


    @property
    def runs(self) -> int | None:
        """Child runs the study makes: a run per replicate per trial (a whole grid's
        skipped points make none)."""
        if self.trials is None:
            return None
        skipped = self.skipped_points if self.trials == self.grid_points else 0
        return (self.trials - skipped) * self.spec.replicates

    @property
    def startup_minutes(self) -> float | None:
        """The runs' start-up alone, in minutes: a floor under the study's time."""
        return None if self.runs is None else self.runs * STARTUP_S[self.spec.env_manager] / 60

    def lines(self) -> list[str]:
        """The plan as the console prints it."""
        spec = self.spec
        searched = ", ".join(_dimension_text(d) for d in spec.search_space) or "nothing"
        trials = (f"{self.trials} trials" if self.trials is not None
                  else f"trials until {spec.timeout_s:g} s have passed")
        if self.grid_points is not None:
            skipped = f", {self.skipped_points} skipped here" if self.skipped_points else ""
            trials += f" (the grid has {self.grid_points} points{skipped})"
        runs = f"{self.runs} runs" if self.runs is not None else "a run per replicate per trial"
        lines = [
            f"study {spec.name!r} (experiment {spec.experiment or spec.name!r}): "
            f"{spec.entry_point} on {_target(spec)}, env_manager {spec.env_manager}",
            f"searches: {searched}",
            f"sampler {spec.sampler}, pruner {spec.pruner}; {trials} x {spec.replicates} "
            f"replicate(s) = {runs}, each in a fresh process",
            "objectives: " + ", ".join(f"{o.direction} {o.metric}" + (
                "" if o.reduce == "last" else f" ({o.reduce} over its history)")
                for o in spec.objectives),
        ]
        if batch_size(spec) > 1:
            lines.append(f"order: interleaved rounds, up to {batch_size(spec)} trials at once "
                         f"(replicate 0 of each, then 1 ..., each round in a seeded order)")
        if spec.host_class:
            lines.append(f"fleet: this host's class {spec.host_class}; runs tagged with it")
        if spec.warm_start:
            lines.append(f"warm start: from study {spec.warm_start!r} when this study is made")
        if spec.constraints:
            lines.append("constraints: " + ", ".join(f"{c.metric} {c.op} {c.value:g}"
                                                     for c in spec.constraints))
        if spec.decide is not None:
            minutes = "" if spec.decide.minutes is None else \
                f", at most {spec.decide.minutes:g} min"
            lines.append(f"decide: after the study, up to {spec.decide.rounds} rounds{minutes} "
                         "of the configurations behind its open answers (mlflow-dlaas decide)")
        lines += [f"library: {text}" for text in self.libraries]
        lines += [f"package: {text}" for text in self.packages]
        lines += list(self.skipped)
        fewest = fewest_runs_per_side()
        if spec.replicates < fewest:
            lines.append(
                f"note: {spec.replicates} replicate(s) a configuration: the report's comparisons "
                f"between configurations can never decide (an exact test of "
                f"{spec.replicates} against {spec.replicates} runs cannot reach p < {ALPHA:g}); "
                f"replicates: {fewest} is the fewest that can")
        if self.startup_minutes is not None:
            lines.append(f"time: at least {self.startup_minutes:.1f} min of start-up "
                         f"({STARTUP_S[spec.env_manager]:g} s a run), plus the work itself")
        if spec.timeout_s is not None:
            lines.append(f"time: stops after {spec.timeout_s:g} s")
        return lines


def _target(spec: StudySpec) -> str:
    """The built-in projects a study runs, or the user's own project."""
    if spec.project:
        return f"your project {redact_uri(spec.project)} (settings applied from outside)"
    return ", ".join(spec.frameworks)


def plan_study(spec: StudySpec, *, max_trials: int | None = None) -> StudyPlan:
    """The plan of ``spec`` (its ``n_trials`` capped at ``max_trials``); ConfigError (one
    line, how to fix) when this machine cannot run it: a preloaded library or, under
    ``env_manager: local``, a project's framework is missing, or it can measure none of the
    grid's points. Points it cannot measure as meant are listed, to be skipped."""
    if max_trials is not None:
        spec = replace(spec, n_trials=min(spec.n_trials or max_trials, max_trials))
    grid = grid_space(spec) if spec.sampler == "grid" else None
    points = math.prod(len(v) for v in grid.values()) if grid is not None else None
    trials = spec.n_trials
    if points is not None:
        trials = points if trials is None else min(trials, points)
    skipped = skipped_settings(spec)
    refuse_if_nothing_measurable(spec, skipped)
    return StudyPlan(spec, trials, points, _libraries(spec), _packages(spec),
                     tuple(skipped_lines(spec, skipped)),
                     sum(count for _, count, _, _ in skipped) if points else 0)


def _libraries(spec: StudySpec) -> tuple[str, ...]:
    found = []
    for setting in PRELOADED:
        for choice in _values(spec, setting):
            if choice not in ("", "default"):
                found.append(f"{setting}={choice}: {library_file(setting, str(choice))}")
    return tuple(found)


def _values(spec: StudySpec, name: str) -> tuple[object, ...]:
    if name in spec.fixed:
        return (spec.fixed[name],)
    for d in spec.search_space:
        if d.name == name and d.kind == "categorical":
            return d.choices
    return ()


def _packages(spec: StudySpec) -> tuple[str, ...]:
    """Under ``env_manager: local`` the projects run in this environment: each project's
    framework (the first dependency of its ``python_env.yaml``), and what its models need,
    must be installed here."""
    if spec.env_manager != "local":
        return ()
    found = []
    for project in spec.frameworks:
        for requirement in _requirements(project, spec):
            found.append(f"{project}: {_installed(project, requirement)}")
    return tuple(found)


def _requirements(project: str, spec: StudySpec) -> list[Requirement]:
    """The project's framework, and ``transformers`` where the study serves a text model."""
    requirement = _framework_requirement(project)
    if requirement is None:
        return []
    models = {spec.fixed.get("model")} | {choice for d in spec.search_space
                                          if d.name == "model" for choice in d.choices}
    text = _listed_requirement(project, "transformers") if models & set(TEXT_MODELS) else None
    return [requirement, *([text] if text else [])]


def _installed(project: str, requirement: Requirement) -> str:
    """``name version`` of the installed package; ConfigError when it is missing or does not
    meet ``requirement``."""
    try:
        version = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"study spec: {project} needs {requirement}, which is not installed in this "
            f"environment (env_manager: local runs the project here); install it or set "
            f"env_manager: virtualenv") from None
    if not requirement.specifier.contains(version, prereleases=True):
        raise ConfigError(
            f"study spec: {project} needs {requirement}, but {requirement.name} {version} "
            f"is installed here; set env_manager: virtualenv (its own environment)")
    return f"{requirement.name} {version}"


def _dependencies(project: str) -> list[Requirement]:
    """The requirements a project's ``python_env.yaml`` lists (none when it has no file)."""
    path = project_dir(project) / "python_env.yaml"
    if not path.is_file():
        return []
    listed = (yaml.safe_load(path.read_text()) or {}).get("dependencies") or []
    found = []
    for text in listed:
        try:
            found.append(Requirement(str(text)))
        except InvalidRequirement:
            continue
    return found


def _framework_requirement(project: str) -> Requirement | None:
    """The project's framework: the first dependency its ``python_env.yaml`` lists."""
    dependencies = _dependencies(project)
    return dependencies[0] if dependencies else None


def _listed_requirement(project: str, name: str) -> Requirement | None:
    return next((r for r in _dependencies(project) if r.name == name), None)


def _dimension_text(d: Dimension) -> str:
    if d.kind == "categorical":
        return f"{d.name} in {list(d.choices)}"
    scale = " (log)" if d.log else ""
    step = f" step {d.step:g}" if d.step is not None else ""
    return f"{d.name} {d.low:g}..{d.high:g}{step}{scale}"
