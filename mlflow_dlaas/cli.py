"""The ``mlflow-dlaas`` command: parse, call the library (its errors in one line each:
:mod:`mlflow_dlaas.command_errors`)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from mlflow_dlaas import __version__
from mlflow_dlaas.command_errors import reports_errors
from mlflow_dlaas.console_log import quiet_library_chatter
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.fleet_command import fleet
from mlflow_dlaas.runs.goals import HOW, parse_asks
from mlflow_dlaas.runs.schema import check_run_name
from mlflow_dlaas.runs.ui_links import DEFAULT_UI_URL, UI_URL_ENV

F = TypeVar("F", bound=Callable[..., Any])

@click.group()
@click.version_option(__version__, prog_name="mlflow-dlaas")
def cli() -> None:
    """Measure and compare deep-learning frameworks in MLflow runs."""
    quiet_library_chatter()


@cli.command("env")
@click.option("--json", "as_json", is_flag=True, help="Print the fingerprint as JSON.")
@click.option("--shallow", is_flag=True,
              help="Do not import the installed frameworks (faster; versions only).")
@reports_errors
def env_command(as_json: bool, shallow: bool) -> None:
    """Print this machine's hardware and software fingerprint."""
    from mlflow_dlaas.backends.builds import framework_builds
    from mlflow_dlaas.environment import fingerprint

    data = {**fingerprint(), **framework_builds(deep=not shallow)}
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    for key, value in data.items():
        text = str(value)
        if "\n" in text:
            text = text.strip().replace("\n", "\n    ")
            click.echo(f"{key}:\n    {text}")
        else:
            click.echo(f"{key}: {text}")


@cli.command("monitor", context_settings={"ignore_unknown_options": True})
@click.option("--interval", "interval_s", type=float, default=None,
              help="Seconds between samples (default 0.2, works down to 0.05).")
@click.option("--experiment", default=None, help="MLflow experiment name (created if absent).")
@click.option("--run-name", default=None,
              help="Name of the MLflow run (default: monitor-<program>[-<script>], e.g. "
                   "monitor-python-fit.py).")
@click.option("--threads", default=None, metavar="N",
              help="intra_op_threads: OpenMP, MKL, OpenBLAS, BLIS and TensorFlow intra-op "
                   "pools, through their variables.")
@click.option("--allocator", default=None, metavar="NAME",
              help="default, jemalloc or tcmalloc (preloaded).")
@click.option("--openmp-runtime", default=None, metavar="NAME",
              help="default, gnu or intel (preloaded).")
@click.option("--set", "others", multiple=True, metavar="NAME=VALUE",
              help="Any other setting a study applies around a project (inter_op_threads, "
                   "omp_threads, blas_threads, cpu_affinity, omp_proc_bind, ...); repeatable.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@reports_errors
def monitor_command(
    interval_s: float | None, experiment: str | None, run_name: str | None,
    threads: str | None, allocator: str | None, openmp_runtime: str | None,
    others: tuple[str, ...], command: tuple[str, ...]
) -> None:
    """Run COMMAND in a new MLflow run, with the given thread and library settings applied
    around it, and record its resource use, the libraries mapped and a validity verdict.

    Exits with COMMAND's exit code (1 where it exited 0 but did not take a setting).
    Example: mlflow-dlaas monitor --threads 2 --allocator jemalloc -- python train.py
    """
    from mlflow_dlaas.monitor.resource_monitor import DEFAULT_INTERVAL_S
    from mlflow_dlaas.own_project.command import run_monitored

    settings = {name: value for name, value in (("intra_op_threads", threads),
                                                ("allocator", allocator),
                                                ("openmp_runtime", openmp_runtime))
                if value is not None}
    for name, value in settings.items():
        if not value.strip():
            raise ConfigError(f"--{name.replace('_op', '').replace('_', '-')} is empty: give "
                              "a value, or leave the option out for the default")
    if run_name is not None:
        check_run_name(run_name, "--run-name")
    for pair in others:
        name, eq, value = pair.partition("=")
        if not eq or not name.strip():
            raise ConfigError(f"--set {pair!r}: write NAME=VALUE, e.g. --set omp_threads=2")
        settings[name.strip()] = value.strip()
    outcome = run_monitored(
        command,
        interval_s=DEFAULT_INTERVAL_S if interval_s is None else interval_s,
        experiment=experiment,
        run_name=run_name,
        settings=settings,
    )
    for problem in outcome.problems:
        click.echo(f"mlflow-dlaas: {problem}", err=True)
    click.echo(
        f"mlflow-dlaas: run {outcome.run_id}: exit code {outcome.exit_code}, "
        f"{outcome.wall_time_s:.2f} s wall, {outcome.kernel_cpu_seconds:.2f} s CPU",
        err=True,
    )
    sys.exit(outcome.exit_code or (1 if outcome.problems else 0))


def _ui_url_option(func: F) -> F:
    """``--ui-url``: where the links to runs point (set for this command and its children)."""

    def remember(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value:
            os.environ[UI_URL_ENV] = value

    return click.option(
        "--ui-url", default=None, metavar="URL", expose_value=False, callback=remember,
        help=f"Where the MLflow UI runs, for the links to runs (default: ${UI_URL_ENV}, "
             f"else the tracking server where it is http(s)://, else {DEFAULT_UI_URL}, "
             "where `mlflow ui` serves by default).")(func)


@cli.command("study")
@_ui_url_option
@click.argument("spec_path", metavar="SPEC.yaml", type=click.Path(dir_okay=False))
@click.option("--storage", default=None, envvar="MLFLOW_DLAAS_STORAGE",
              help="Optuna storage: journal[:PATH], sqlite:///PATH, postgresql://..., "
                   "redis://... (default: $MLFLOW_DLAAS_STORAGE, else ./optuna.db).")
@click.option("--dry-run", is_flag=True,
              help="Check the spec fully and print the plan (trials, runs, libraries, "
                   "packages, time); create no run, study or file.")
@click.option("--trials", type=click.IntRange(min=1), default=None, metavar="N",
              help="Stop once N trials of the study count (at most the spec's n_trials): "
                   "a first look; rerun without it to resume the rest.")
@click.option("--fleet", is_flag=True,
              help="This host's own study of a fleet, NAME@HOST_CLASS, holding every point: "
                   "run it on each host against one --storage and tracking server; the "
                   "report sets the hosts side by side (docs/fleet.md).")
@click.option("--host-class", default=None, metavar="NAME",
              help="The fleet's name for this kind of host (e.g. c7i.large; implies --fleet; "
                   "default: from the host's fingerprint).")
@click.option("--warm-start", default=None, metavar="STUDY",
              help="Start a new study from an earlier one of the same storage: its trials "
                   "added where this host's fingerprint matches, its best points queued "
                   "first where it does not.")
@reports_errors
def study_command(spec_path: str, storage: str | None, dry_run: bool,
                  trials: int | None, fleet: bool, host_class: str | None,
                  warm_start: str | None) -> None:
    """Run (or resume) the Optuna study SPEC.yaml; every trial is a child MLflow run.

    Run the same command on several machines (one shared --storage and tracking server)
    for parallel workers, or with --fleet for one study per host class. Exit code 2 when
    the spec is invalid; nothing is launched then.
    """
    from mlflow_dlaas.tuning.plan import plan_study
    from mlflow_dlaas.tuning.spec import load_spec

    spec = load_spec(spec_path)
    if fleet or host_class is not None:
        from mlflow_dlaas.tuning.fleet import fleet_spec, this_host_class

        spec = fleet_spec(spec, this_host_class(host_class))
    if warm_start:
        spec = dataclasses.replace(spec, warm_start=warm_start)
    plan = plan_study(spec, max_trials=trials)
    if dry_run:
        for line in plan.lines():
            click.echo(line)
        click.echo("dry run: nothing was created")
        return
    from mlflow_dlaas.tuning.study import run_study
    from mlflow_dlaas.tuning.study_artifacts import best_lines

    summary = run_study(plan.spec, storage_url=storage or None)
    for line in best_lines(summary.best):
        click.echo(line)
    if plan.spec.decide is not None and trials is None:
        from mlflow_dlaas.decide.command import decide

        outcome = decide(experiment=plan.spec.experiment or plan.spec.name,
                         budget=plan.spec.decide, seed=plan.spec.decide_seed)
        for line in outcome.lines:
            click.echo(f"decided: {line}")


def _scope_options(func: F) -> F:
    func = click.option("--include-disturbed", is_flag=True,
                        help="Keep runs tagged dlaas.validity=disturbed (left out by default) "
                             "and let disturbed and unverified runs count toward a winner.")(func)
    func = click.option("--study", default=None,
                        help="A study's name: its trial runs, in any experiment.")(func)
    return click.option("--experiment", default=None,
                        help="An experiment's name: all its runs.")(func)


@cli.command("compare")
@_ui_url_option
@_scope_options
@click.option("--output", default=None, type=click.Path(file_okay=False),
              help="Directory for report.html, report.md, plots/ and runs.csv "
                   "(default ./dlaas-reports/<scope>).")
@click.option("--objective", "objectives", multiple=True,
              help="Add a recommendation for this objective (see `recommend --help`).")
@click.option("--constraint", "constraints", multiple=True,
              help="A bound on the added recommendations, e.g. 'peak_memory<=2GiB'.")
@click.option("--no-run", is_flag=True, help="Only write the files; log no report run.")
@click.option("--price", "price_pairs", multiple=True, metavar="CLASS=USD_PER_HOUR",
              help="A host class's price, for the cost of each host's best answer (with "
                   "--price-source and --price-date).")
@click.option("--price-source", default=None, metavar="TEXT",
              help="Where the prices come from (e.g. 'AWS on-demand, us-east-1').")
@click.option("--price-date", default=None, metavar="YYYY-MM-DD", help="When they were read.")
@click.option("--prices", "prices_file", default=None, type=click.Path(dir_okay=False),
              help="A YAML file: source:, date:, usd_per_hour: {CLASS: USD}.")
@reports_errors
def compare_command(experiment: str | None, study: str | None, include_disturbed: bool,
                    output: str | None, objectives: tuple[str, ...],
                    constraints: tuple[str, ...], no_run: bool, price_pairs: tuple[str, ...],
                    price_source: str | None, price_date: str | None,
                    prices_file: str | None) -> None:
    """Compare the runs of an experiment or a study: tables, plots, recommendations.

    Writes a self-contained HTML report and a Markdown summary, and logs both as the
    artifacts of a report run (tag dlaas.entry=report) in the compared runs' experiment.
    Runs of different hosts (tag dlaas.host) get sections of their own, never pooled.
    """
    parse_asks(objectives, constraints)  # a bad ask fails before the report's libraries load
    from mlflow_dlaas.report.command import compare
    from mlflow_dlaas.report.cost import parse_prices

    prices = parse_prices(price_pairs, price_source, price_date, prices_file)
    written, run_id = compare(experiment=experiment, study=study, output=output,
                              objectives=objectives, constraints=constraints,
                              log_run=not no_run, include_disturbed=include_disturbed,
                              prices=prices)
    click.echo(f"report: {written.html.resolve()}")
    click.echo(f"summary: {written.markdown.resolve()}")
    if run_id:
        click.echo(f"report run: {run_id}")
    written.raise_if_incomplete()


@cli.command("recommend")
@_ui_url_option
@_scope_options
@click.option("--objective", required=True, help=f"What to optimise: {HOW}.")
@click.option("--constraint", "constraints", multiple=True,
              help="NAME OP VALUE, e.g. 'accuracy>=0.98', 'peak_memory<=2GiB', "
                   "'p99_latency<=5' (ms); repeatable. Judged on medians over replicates.")
@click.option("--batch-size", type=int, default=None,
              help="Inference objectives: only this batch size (default: any).")
@click.option("--host", default=None, metavar="HASH",
              help="Judge the runs of this host (tag dlaas.host); default: the host with the "
                   "most valid runs. Runs of different hosts are never pooled.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@reports_errors
def recommend_command(experiment: str | None, study: str | None, include_disturbed: bool,
                      objective: str, constraints: tuple[str, ...], batch_size: int | None,
                      host: str | None, as_json: bool) -> None:
    """The best framework and settings for an objective under constraints, one answer per
    workload (runs of another model, data set or epoch count are never ranked together).

    Each answer states the best configuration against the next best as a ratio with its
    95 % interval and one verdict: ahead by X, no meaningful difference, not separable, or
    too few runs (3 valid runs a side at least). Exit code 0 with the answers and their
    evidence runs; 1 when no workload has a configuration that meets the constraints (the
    output says how many each constraint excluded).
    """
    parse_asks((objective,), constraints)  # a bad ask fails before the report's libraries load
    from mlflow_dlaas.report.command import recommend_command as recommend

    answered = recommend(experiment=experiment, study=study, objective=objective,
                         constraints=constraints, batch_size=batch_size, host=host,
                         include_disturbed=include_disturbed)
    answers = answered.recommendations
    found = any(answer.found for answer in answers)
    if as_json:
        click.echo(json.dumps({"found": found, "host": answered.host,
                               "notes": list(answered.notes),
                               "answers": [answer.as_json() for answer in answers]},
                              indent=2, default=str))
        sys.exit(0 if found else 1)
    for answer in answers:
        if answer.workload:
            click.echo(f"workload {answer.workload}:")
        click.echo(answer.sentence())
        if answer.in_part:
            click.echo(f"  {answer.in_part}")
        if answer.test_text():
            click.echo(f"  test: {answer.test_text()}")
        for evidence in answer.evidence:
            click.echo(f"  evidence: {evidence.run_name} {evidence.link}")
        for name, value in answer.runner_up_names():
            click.echo(f"  next: {name}: {value}")
        for line in answer.never_finished:
            click.echo(f"  tried, never finished: {line}")
    for note in answered.notes:
        click.echo(f"note: {note}")
    sys.exit(0 if found else 1)


@cli.command("decide")
@_ui_url_option
@click.option("--experiment", required=True, help="The experiment whose open answers to settle.")
@click.option("--budget", default=None,
              help="Rounds (e.g. 12, the default: the sequential rule's budget) or minutes "
                   "(e.g. 10m, within the default rounds; a round starts only where it ends in "
                   "time, the first excepted).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Draws each round's order (recorded on every run).")
@click.option("--include-disturbed", is_flag=True,
              help="Let disturbed and unverified runs count toward a verdict.")
@click.option("--dry-run", is_flag=True, help="List the open answers; measure nothing.")
@reports_errors
def decide_command(experiment: str, budget: str | None, seed: int, include_disturbed: bool,
                   dry_run: bool) -> None:
    """Measure more of only the configurations behind the experiment's open answers, on this
    machine, in interleaved rounds (each configuration once a round, in a seeded random
    order), until each answer is decided or the budget is spent.

    A look after every round decides by the sequential rule (docs/report.md): the chance of
    a false "different" stays at or below 5 % over all the looks. Runs are launched from the
    entry point and params the open answers' runs recorded (projects/<framework> runs only).
    Exit code 0 when every answer that was open is decided, 1 when some remain open (each
    says how many more rounds would settle it).
    """
    from mlflow_dlaas.decide.command import decide
    from mlflow_dlaas.sequential import Budget

    outcome = decide(experiment=experiment, budget=Budget.parse(budget), seed=seed,
                     dry_run=dry_run, include_disturbed=include_disturbed)
    for line in outcome.lines:
        click.echo(line)
    if outcome.session:
        click.echo(f"decide run: {outcome.session} ({outcome.rounds} rounds); "
                   f"{outcome.still_open} still open")
    sys.exit(1 if outcome.still_open and not dry_run else 0)


@cli.command("reproduce")
@_ui_url_option
@click.option("--quick", is_flag=True,
              help="The short plan: fits in 20 minutes on 2 cores with the embedded data "
                   "(default).")
@click.option("--full", is_flag=True,
              help="The closer replication (more epochs, settings and replicates); its time "
                   "is estimated before it starts.")
@click.option("--claims", default=None, metavar="1,3,6",
              help="Only these claims (numbers 1-8, comma-separated); default: all.")
@click.option("--experiment", default="dlaas-reproduce", show_default=True,
              help="The MLflow experiment of the studies' runs and of the report run.")
@click.option("--output", default=None, type=click.Path(file_okay=False),
              help="Directory for claims.html, claims.md and plots/ "
                   "(default ./dlaas-reports/reproduce-<plan>).")
@click.option("--specs", default=None, type=click.Path(file_okay=False),
              help="Folder of the claims' study specs (default: the checkout's "
                   "examples/reproduce/).")
@click.option("--include-disturbed", is_flag=True,
              help="Let runs tagged dlaas.validity=disturbed (and unverified ones) count "
                   "toward verdicts; the report says so.")
@click.option("--no-run", is_flag=True, help="Only write the files; log no report run.")
@reports_errors
def reproduce_command(quick: bool, full: bool, claims: str | None, experiment: str,
                      output: str | None, specs: str | None, include_disturbed: bool,
                      no_run: bool) -> None:
    """Re-measure the two papers' findings on this machine and judge each claim.

    Runs each claim's study (examples/reproduce/, resumable: rerun to continue), then writes
    the claims report (one row per claim: holds, does not hold, not separable, not measurable
    here) as HTML and Markdown, logged as a report run.
    """
    from mlflow_dlaas.reproduce.command import reproduce

    if quick and full:
        raise click.UsageError("give --quick or --full, not both")
    done = reproduce(plan="full" if full else "quick", claims=claims, experiment=experiment,
                     output=output, specs=specs, include_disturbed=include_disturbed,
                     log_run=not no_run)
    for result in done.results:
        click.echo(f"claim {result.claim.number}: {result.verdict.verdict}: "
                   f"{result.verdict.reason}")
    click.echo(f"report: {done.html.resolve()}")
    click.echo(f"summary: {done.markdown.resolve()}")
    if done.run_id:
        click.echo(f"report run: {done.run_id}")
    if done.failed:
        from mlflow_dlaas.errors import WorkloadError

        raise WorkloadError("studies failed (the report shows what they measured; rerun to "
                            "resume): " + "; ".join(f"{k}: {v}" for k, v in done.failed.items()))


@cli.command("demo")
@click.option("--replicates", type=int, default=4, show_default=True,
              help="Runs of each training configuration and study cell (4: the fewest "
                   "with which the report can name a winner; 1: a quicker look); serving "
                   "leaves out, after half its rounds, a runtime 2x behind the leader.")
@click.option("--frameworks", default="all", show_default=True, metavar="NAME,...",
              help="Only these frameworks and runtimes (pytorch, tensorflow, mxnet, "
                   "onnxruntime, openvino). The study is PyTorch's.")
@reports_errors
def demo_command(replicates: int, frameworks: str) -> None:
    """Run the main job on the embedded default (what `make demo` runs)."""
    from mlflow_dlaas.demo import DEMO_SYSTEMS, run_demo

    chosen = [f.strip() for f in frameworks.split(",") if f.strip()]
    if not chosen:
        raise ConfigError(f"--frameworks is empty: give some of {', '.join(DEMO_SYSTEMS)}, "
                          "or all")
    run_demo(replicates, chosen)


@cli.command("resend")
@click.argument("paths", nargs=-1, metavar="[RUN_JOURNAL...]",
                type=click.Path(file_okay=False, path_type=Path))
@reports_errors
def resend_command(paths: tuple[Path, ...]) -> None:
    """Send what runs logged while their tracking server did not answer, from their journals
    (default: every journal on this machine), to MLFLOW_TRACKING_URI or the server they were
    logged to. Sending twice is harmless."""
    from mlflow_dlaas.store.resend import resend_journals

    resend_journals(list(paths))


@cli.command("prepare")
@click.argument("projects", nargs=-1, required=True, metavar="PROJECT...")
@click.option("--env-manager", type=click.Choice(["virtualenv", "uv"]), default="virtualenv",
              show_default=True, help="The manager the runs will name in --env-manager.")
@reports_errors
def prepare_command(projects: tuple[str, ...], env_manager: str) -> None:
    """Build the environment each PROJECT (a framework or runtime, e.g. mxnet) runs in under
    --env-manager, ahead of its first run (`make demo` and `make test` do it for MXNet)."""
    from mlflow_dlaas.console_log import quiet_library_chatter
    from mlflow_dlaas.launch import environment_dir, prepare_environment

    quiet_library_chatter()
    for project in projects:
        if not environment_dir(project, env_manager).exists():
            click.echo(f"{project} ({env_manager}): building it (minutes, once) ...", err=True)
        click.echo(f"{project} ({env_manager}): {prepare_environment(project, env_manager)}")


@cli.command("projects-path")
@click.argument("project", required=False)
@reports_errors
def projects_path_command(project: str | None) -> None:
    """Print the folder of the MLflow Projects, or of PROJECT (a framework or runtime), for
    `mlflow run "$(mlflow-dlaas projects-path pytorch)" -e train ...`."""
    from mlflow_dlaas.project_paths import project_dir, projects_dir

    click.echo(str(project_dir(project) if project else projects_dir()))


cli.add_command(fleet)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="mlflow-dlaas")
