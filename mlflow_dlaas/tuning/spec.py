"""The study spec: a YAML file validated into a frozen value before anything runs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from mlflow.exceptions import MlflowException
from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, _validate_experiment_name

from mlflow_dlaas.config import TrainConfig
from mlflow_dlaas.data import RANDOM_LABEL_DATASETS
from mlflow_dlaas.errors import ConfigError, NotMeasurableHereError
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.launch import ProjectEntry, projects_dir, read_project
from mlflow_dlaas.optuna_access.pruners import PRUNERS
from mlflow_dlaas.own_project.settings import OUTSIDE_SETTINGS, split_settings
from mlflow_dlaas.runs.goals import Bound, Goal, bound, goal
from mlflow_dlaas.runs.schema import EPOCH_TEST_ACCURACY, check_run_name
from mlflow_dlaas.sequential import Budget
from mlflow_dlaas.tuning.search_space import (
    Dimension,
    parse_space,
    refuse_huge_grid,
    refuse_secret,
    samples,
)

ENTRY_POINTS = ("train", "infer")
SAMPLERS = ("tpe", "nsga2", "gp", "grid", "random")
ENV_MANAGERS = ("local", "virtualenv", "uv")
#: vary: replicate r of a trial runs with the trial's seed + r; fixed: all with the trial's seed.
REPLICATE_SEEDS = ("vary", "fixed")
#: The seed the train and infer entry points use when none is given.
DEFAULT_SEED = 0
#: The per-epoch metric a pruner watches, per entry point.
PRUNING_METRIC = {"train": EPOCH_TEST_ACCURACY}
#: Each entry point's own parser of its params (the workload's validation, no framework import).
PARSERS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "train": TrainConfig.from_params, "infer": InferConfig.from_params}
#: The param naming the project's framework, given by the project itself, never by a spec.
PROJECT_PARAM = {"train": "framework", "infer": "runtime"}
#: the most trials and replicates a spec may ask for, checked before anything is made (a
#: billion replicates planned 50 million minutes and started)
MAX_COUNTS = {"n_trials": 100_000, "replicates": 1_000}
TOP_KEYS = {"name", "entry_point", "frameworks", "project", "fixed", "search_space", "objectives",
            "constraints", "sampler", "pruner", "n_trials", "timeout_s", "trial_timeout_s",
            "replicates", "replicate_seeds", "env_manager", "seed", "experiment", "decide"}


@dataclass(frozen=True)
class StudySpec:
    """What to search, how, and for what."""

    name: str
    frameworks: tuple[str, ...]
    objectives: tuple[Goal, ...]
    entry_point: str = "train"
    fixed: Mapping[str, Any] = field(default_factory=dict)
    search_space: tuple[Dimension, ...] = ()
    constraints: tuple[Bound, ...] = ()
    sampler: str = "tpe"
    pruner: str = "none"
    n_trials: int | None = 10
    timeout_s: float | None = None
    trial_timeout_s: float = 1800.0
    replicates: int = 1
    replicate_seeds: str = "vary"
    env_manager: str = "local"
    seed: int | None = None
    experiment: str | None = None  # the MLflow experiment; default: the study's name
    #: the user's own MLflow Project (a folder or git URI) in place of ``frameworks``
    project: str | None = None
    #: the parameters the project's entry point declares
    project_parameters: tuple[str, ...] = ()
    #: ``decide:`` after the study, measure more of its open answers: the budget (None:
    #: not at all) and the seed that draws each round's order
    decide: Budget | None = None
    decide_seed: int = 0
    #: the host class of a fleet study (``--fleet``): its runs are tagged with it
    host_class: str | None = None
    #: the earlier study a new one starts from (``--warm-start``)
    warm_start: str | None = None

    @property
    def directions(self) -> list[str]:
        return [o.direction for o in self.objectives]

    @property
    def multi_objective(self) -> bool:
        return len(self.objectives) > 1


#: A study spec larger than this is refused before it is parsed (the examples are < 2 KB).
MAX_SPEC_BYTES = 1 * 2**20
#: How deep a spec's lists and mappings may nest (the examples: 4); 800 KB of brackets
#: exhausted Python's recursion before.
MAX_SPEC_DEPTH = 32


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without aliases (``*anchor`` references can nest into a document of billions of
    values, "billion laughs"; a spec writes its values out) and at most
    :data:`MAX_SPEC_DEPTH` levels deep."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            raise ConfigError(f"line {mark.line + 1}: YAML aliases (*name) are not accepted in "
                              "a study spec; write the values out")
        if self._depth >= MAX_SPEC_DEPTH:
            raise ConfigError(f"line {mark.line + 1}: nested more than {MAX_SPEC_DEPTH} levels "
                              "deep; a spec is a few levels of mappings and lists")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_spec(path: str | Path) -> StudySpec:
    """Read and validate a spec file; errors name the key and what would be valid. Only a
    regular file of at most :data:`MAX_SPEC_BYTES` is read, as UTF-8 YAML without aliases."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"study spec {path} does not exist")
    if not path.is_file():
        raise ConfigError(f"study spec {path} is not a regular file; give a YAML file")
    with path.open("rb") as f:
        data = f.read(MAX_SPEC_BYTES + 1)
    if len(data) > MAX_SPEC_BYTES:
        raise ConfigError(f"study spec {path} is larger than {MAX_SPEC_BYTES // 2**20} MiB; "
                          "a spec is a few lines of YAML")
    try:
        raw = yaml.load(data.decode("utf-8"), Loader=_NoAliasLoader)  # a SafeLoader
    except UnicodeDecodeError:
        raise ConfigError(f"study spec {path} is not text (UTF-8); give a YAML file") from None
    except ConfigError as e:  # an alias, too deep
        raise ConfigError(f"study spec {path}: {e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"study spec {path} is not valid YAML: {e}") from None
    except ValueError as e:  # a number longer than Python converts (4,300 digits)
        raise ConfigError(f"study spec {path}: {str(e).split(';')[0]}; write a shorter "
                          "number") from None
    return parse_spec(raw, default_name=path.stem, folder=path.resolve().parent)


def parse_spec(raw: Any, *, default_name: str = "study", folder: Path | None = None
               ) -> StudySpec:
    """Validate a spec mapping (as read from YAML); a relative ``project`` path is read
    from ``folder`` (the spec file's)."""
    if not isinstance(raw, Mapping):
        raise ConfigError("study spec: the top level must be a mapping of keys to values")
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        raise ConfigError(f"study spec: unknown key(s) {', '.join(unknown)}; valid keys: "
                          f"{', '.join(sorted(TOP_KEYS))}")
    if "project" in raw:
        return _project_spec(raw, default_name, folder or Path.cwd())
    entry = _choice(raw, "entry_point", ENTRY_POINTS, "train")
    frameworks = raw.get("frameworks")
    if isinstance(frameworks, str):
        frameworks = [frameworks]
    if not frameworks or not isinstance(frameworks, list):
        raise ConfigError("study spec: frameworks: give a list, e.g. [pytorch, tensorflow]")
    known = projects_with(entry)
    for fw in frameworks:
        if fw not in known:
            raise ConfigError(f"study spec: frameworks: unknown {entry} project {fw!r}; "
                              f"valid for entry_point {entry}: {', '.join(sorted(known))}")
    fixed = _fixed(raw)
    space = parse_space(raw)
    overlap = sorted(set(fixed) & {d.name for d in space})
    if overlap:
        raise ConfigError(f"study spec: {', '.join(overlap)} is both fixed and searched; "
                          "keep it in one of fixed or search_space")
    _check_seed(fixed, space)
    _check_params(entry, frameworks, fixed, space)
    common = _common(raw, default_name, space)
    _check_accuracy_is_measured(fixed, space, common)
    if common["pruner"] != "none" and entry not in PRUNING_METRIC:
        raise ConfigError(f"study spec: pruner: {entry} runs report no per-epoch metric to "
                          "prune on; set pruner: none")
    return StudySpec(frameworks=tuple(frameworks), entry_point=entry, fixed=dict(fixed),
                     search_space=space, **common)


def _project_spec(raw: Mapping[str, Any], default_name: str, folder: Path) -> StudySpec:
    """A spec over the user's own MLflow Project: its parameters and our settings."""
    if raw.get("frameworks"):
        raise ConfigError("study spec: give either project (your own MLflow Project) or "
                          "frameworks (the built-in workloads), not both")
    uri = project_uri(raw["project"], folder)
    entry_point = str(raw.get("entry_point") or "main")
    entry = read_project(uri, entry_point)
    fixed = _fixed(raw)
    space = parse_space(raw)
    _check_project_params(entry, fixed, space)
    common = _common(raw, default_name, space)
    if common["pruner"] != "none":
        raise ConfigError("study spec: pruner: a project's trials report no epochs to prune "
                          "on; set pruner: none")
    return StudySpec(frameworks=(), entry_point=entry_point, fixed=dict(fixed),
                     search_space=space, project=uri,
                     project_parameters=tuple(entry.parameters), **common)


def project_uri(value: Any, folder: Path) -> str:
    """A git URI as given; a folder, relative to the spec's, as an absolute path."""
    text = str(value or "").strip()
    if not text:
        raise ConfigError("study spec: project: give the folder or git URI of an MLflow "
                          "Project, as `mlflow run` takes")
    if "://" in text or text.startswith("git@"):
        return text
    path = (folder / text).resolve()
    if not path.is_dir():
        raise ConfigError(f"study spec: project: {path} is not a folder; give your MLflow "
                          "Project's folder (relative to the spec file) or a git URI")
    return str(path)


def project_name(uri: str | None) -> str:
    """A project's short name: its folder's or repository's."""
    text = str(uri or "").rstrip("/").split("#")[0]
    return text.rsplit("/", 1)[-1].removesuffix(".git") or text


def _check_project_params(entry: ProjectEntry, fixed: Mapping[str, Any],
                          space: tuple[Dimension, ...]) -> None:
    """Every name is one of our settings or a parameter of the project; the settings'
    values parse; the project's required parameters are given."""
    given = [*fixed, *(d.name for d in space)]
    overlap = sorted(set(fixed) & {d.name for d in space})
    if overlap:
        raise ConfigError(f"study spec: {', '.join(overlap)} is both fixed and searched; "
                          "keep it in one of fixed or search_space")
    unknown = [n for n in given if n not in OUTSIDE_SETTINGS and n not in entry.parameters]
    if unknown and not entry.open_ended:
        raise ConfigError(
            f"study spec: {', '.join(unknown)}: not a parameter of {entry.uri} (entry point "
            f"{entry.entry_point}: {', '.join(entry.parameters) or 'none'}) nor a setting "
            f"mlflow-dlaas applies ({', '.join(OUTSIDE_SETTINGS)})")
    missing = [n for n, default in entry.parameters.items() if default is None
               and n not in given]
    if missing:
        raise ConfigError(f"study spec: {', '.join(missing)}: required by {entry.uri} (no "
                          "default); give it under fixed or search_space")
    first = {d.name: samples(d)[0] for d in space}
    for where, params in [("fixed", fixed), *((f"search_space.{d.name}={v!r}",
                                               {**fixed, **first, d.name: v})
                                              for d in space for v in samples(d))]:
        try:
            split_settings(params)
        except ConfigError as e:
            raise ConfigError(f"study spec: {where}: {e}") from None


def _check_accuracy_is_measured(fixed: Mapping[str, Any], space: tuple[Dimension, ...],
                                common: Mapping[str, Any]) -> None:
    """An accuracy goal on a data set with random labels is refused before any run."""
    datasets = {fixed.get("dataset")} | {v for d in space if d.name == "dataset"
                                         for v in samples(d)}
    synthetic = sorted(str(d) for d in datasets & RANDOM_LABEL_DATASETS)
    goals = [*common["objectives"], *common["constraints"]]
    asked = sorted({g.metric for g in goals if "accuracy" in g.metric})
    if synthetic and asked:
        raise ConfigError(f"study spec: {', '.join(asked)}: accuracy is not measured on "
                          f"{', '.join(synthetic)} (random images, random labels); choose a "
                          "time, throughput, memory or energy goal, or a real data set")


def _common(raw: Mapping[str, Any], default_name: str, space: tuple[Dimension, ...]
            ) -> dict[str, Any]:
    """The keys every spec reads alike: goals, sampler, budget, names."""
    objectives = tuple(_objective(i, o) for i, o in enumerate(_list(raw, "objectives")))
    if not objectives:
        raise ConfigError("study spec: objectives: give at least one, e.g. "
                          "[{metric: accuracy, direction: maximize}]")
    constraints = tuple(_constraint(i, c) for i, c in enumerate(_list(raw, "constraints")))
    sampler = _choice(raw, "sampler", SAMPLERS, "nsga2" if len(objectives) > 1 else "tpe")
    pruner = _choice(raw, "pruner", PRUNERS, "none")
    if pruner != "none" and len(objectives) > 1:
        raise ConfigError("study spec: pruner: Optuna prunes single-objective studies only; "
                          "set pruner: none or keep one objective")
    if sampler == "grid":
        for d in space:
            if d.kind != "categorical" and d.step is None:
                raise ConfigError(f"study spec: search_space.{d.name}: the grid sampler needs "
                                  "categorical choices or a step")
        searched = raw.get("frameworks")
        refuse_huge_grid(space, len(searched) if isinstance(searched, list) else 1)
    n_trials = _positive_int(raw, "n_trials", 10 if raw.get("timeout_s") is None else None)
    timeout_s = _positive_number(raw, "timeout_s", None)
    name = str(raw.get("name") or default_name)
    experiment = str(raw["experiment"]) if raw.get("experiment") else None
    _check_names(name, experiment)
    return dict(
        name=name,
        objectives=objectives,
        constraints=constraints,
        sampler=sampler,
        pruner=pruner,
        n_trials=n_trials,
        timeout_s=timeout_s,
        trial_timeout_s=_positive_number(raw, "trial_timeout_s", 1800.0),
        replicates=_positive_int(raw, "replicates", 1),
        replicate_seeds=_choice(raw, "replicate_seeds", REPLICATE_SEEDS, "vary"),
        env_manager=_choice(raw, "env_manager", ENV_MANAGERS, "local"),
        seed=_sampler_seed(raw.get("seed")),
        experiment=experiment,
        **_decide(raw.get("decide")),
    )


def _decide(value: Any) -> dict[str, Any]:
    """``decide: {budget: 12 | 10m, seed: 0}``: the budget and seed of the rounds measured
    after the study, where its answers are open."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not set(value) <= {"budget", "seed"}:
        raise ConfigError("study spec: decide: give {budget: 12} (rounds) or {budget: 10m} "
                          "(minutes), and optionally seed: 0")
    seed = value.get("seed", 0)
    if not _is_whole(seed) or seed < 0:
        raise ConfigError(f"study spec: decide.seed: must be a whole number >= 0, got {seed!r}")
    try:
        budget = Budget.parse(None if value.get("budget") is None else str(value["budget"]))
    except ConfigError as e:
        raise ConfigError(f"study spec: decide.budget: {e}") from None
    return {"decide": budget, "decide_seed": int(seed)}


def replicate_seed(trial_params: Mapping[str, Any], replicate: int, replicate_seeds: str) -> int:
    """The entry point's ``seed`` for replicate ``replicate`` (from 0) of a trial.

    The trial's seed (fixed, sampled, or the entry points' default 0), plus ``replicate``
    when ``replicate_seeds`` is ``vary``, so that the replicates' spread shows the seed's
    effect.
    """
    seed = int(trial_params.get("seed", DEFAULT_SEED))
    return seed + replicate if replicate_seeds == "vary" else seed


def projects_with(entry_point: str) -> list[str]:
    """The projects under ``projects/`` whose MLproject declares ``entry_point``."""
    found = []
    for mlproject in sorted(projects_dir().glob("*/MLproject")):
        declared = (yaml.safe_load(mlproject.read_text()) or {}).get("entry_points") or {}
        if entry_point in declared:
            found.append(mlproject.parent.name)
    return found


def _check_params(entry: str, frameworks: Sequence[str], fixed: Mapping[str, Any],
                  space: tuple[Dimension, ...]) -> None:
    """Parse what the trials' entry points will be given, as their workload does: the fixed
    values, then each searched value (bounds, a middle value, every choice) with the other
    dimensions at their first value. Values travel as strings, as MLflow Projects passes them."""
    project_param = PROJECT_PARAM[entry]
    for key in ("framework", "runtime"):
        if key in fixed or key in {d.name for d in space}:
            raise ConfigError(f"study spec: {key}: the frameworks key chooses the project; "
                              f"remove {key} from fixed and search_space")
    parse = PARSERS[entry]

    def check(where: str, params: Mapping[str, Any]) -> None:
        too_long = [k for k, v in params.items() if len(str(v)) > MAX_PARAM_VAL_LENGTH]
        if too_long:
            raise ConfigError(f"study spec: {where}: the value of {too_long[0]} is longer than "
                              f"the {MAX_PARAM_VAL_LENGTH} characters MLflow keeps of a param")
        for fw in frameworks:
            try:
                parse({**{k: str(v) for k, v in params.items()}, project_param: fw})
            except NotMeasurableHereError as e:
                if where == "fixed":  # every point holds it: nothing to measure here
                    raise ConfigError(f"study spec: {where}: {e}") from None
            except ConfigError as e:  # a searched value this machine cannot measure is skipped
                raise ConfigError(f"study spec: {where}: {e}") from None

    check("fixed", fixed)
    first = {d.name: samples(d)[0] for d in space}
    for d in space:
        for value in samples(d):
            check(f"search_space.{d.name}={value!r}", {**fixed, **first, d.name: value})


def _check_names(name: str, experiment: str | None) -> None:
    """The study names its parent run and (unless ``experiment``) its MLflow experiment."""
    check_run_name(name, "study spec: name")  # the study's parent run is named after it
    try:
        _validate_experiment_name(experiment or name)
    except MlflowException as e:
        key = "experiment" if experiment else "name"
        raise ConfigError(f"study spec: {key}: MLflow refuses it as an experiment name: "
                          f"{e.message}") from None


def _sampler_seed(value: Any) -> int | None:
    """The samplers' seed: a whole number NumPy accepts, or absent."""
    if value is not None and not (_is_whole(value) and 0 <= value < 2**32):
        raise ConfigError(f"study spec: seed: must be a whole number from 0 to 2**32 - 1 "
                          f"(or left out), got {value!r}")
    return value


def _check_seed(fixed: Mapping[str, Any], space: tuple[Dimension, ...]) -> None:
    """The entry points' ``seed`` is a whole number (replicates add their index to it)."""
    if "seed" in fixed and not _is_whole(fixed["seed"]):
        raise ConfigError(f"study spec: fixed.seed: must be a whole number, got "
                          f"{fixed['seed']!r}")
    for d in space:
        if d.name == "seed" and (d.kind == "float" or not all(map(_is_whole, d.choices))):
            raise ConfigError("study spec: search_space.seed: give type: int or whole-number "
                              "choices")


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _objective(index: int, o: Any) -> Goal:
    where = f"study spec: objectives[{index}]"
    if not isinstance(o, Mapping) or not isinstance(o.get("metric"), str):
        raise ConfigError(f"{where}: give {{metric: NAME, direction: maximize}} (metric: one "
                          "name)")
    unknown = sorted(set(o) - {"metric", "direction", "reduce"})
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; give metric, "
                          "direction and (optionally) reduce: last|min|max")
    return goal(str(o["metric"]), o.get("direction"), where, o.get("reduce", "last"))


def _constraint(index: int, c: Any) -> Bound:
    where = f"study spec: constraints[{index}]"
    if (not isinstance(c, Mapping) or not {"metric", "op", "value"} <= set(c)
            or not isinstance(c["metric"], str)):
        raise ConfigError(f"{where}: give {{metric: accuracy, op: '>=', value: 0.9}}")
    return bound(str(c["metric"]), c["op"], c["value"], where)


def _list(raw: Mapping[str, Any], key: str) -> list[Any]:
    value = raw.get(key) or []
    if not isinstance(value, list):
        raise ConfigError(f"study spec: {key}: give a list")
    return value


def _choice(raw: Mapping[str, Any], key: str, valid: tuple[str, ...], default: str) -> str:
    value = raw.get(key, default)
    if value not in valid:
        raise ConfigError(f"study spec: {key}: {value!r} is not one of {', '.join(valid)}")
    return value


def _positive_int(raw: Mapping[str, Any], key: str, default: int | None) -> int | None:
    """A whole number from 1 to its bound in :data:`MAX_COUNTS`."""
    value = raw.get(key, default)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"study spec: {key}: must be a whole number >= 1, got {value!r}")
    if value > MAX_COUNTS[key]:
        raise ConfigError(f"study spec: {key}: {value:,} is more than the {MAX_COUNTS[key]:,} "
                          f"a study runs; each is at least one measured run in a fresh "
                          f"process (seconds each): give at most {MAX_COUNTS[key]:,}")
    return value


def _positive_number(raw: Mapping[str, Any], key: str, default: float | None) -> float | None:
    value = raw.get(key, default)
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
            or not math.isfinite(value)):
        raise ConfigError(f"study spec: {key}: must be a finite number of seconds > 0, "
                          f"got {value!r}")
    return float(value)


def _fixed(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``fixed``: a mapping of parameter names to values."""
    fixed = raw.get("fixed") or {}
    if not isinstance(fixed, Mapping) or not all(isinstance(k, str) for k in fixed):
        raise ConfigError("study spec: fixed: give a mapping of parameter name to value, e.g. "
                          "{epochs: 2}")
    for name, value in fixed.items():
        refuse_secret(f"fixed.{name}", name, value)
    return fixed


