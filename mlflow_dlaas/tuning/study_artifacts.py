"""What the parent run shows: the best feasible trial or Pareto front as a table (or the
closest trial, when none is feasible), and Optuna's plots."""

from __future__ import annotations

import logging
import tempfile
import warnings
from pathlib import Path
from typing import Any

import mlflow
import optuna
from optuna.trial import FrozenTrial, TrialState

from mlflow_dlaas.figures import significant
from mlflow_dlaas.runs.schema import (
    BEST_RUN_IDS_TAG,
    BEST_TRIAL_TAG,
    CLOSEST_TRIAL_TAG,
    VALIDITY_TAG,
)
from mlflow_dlaas.store.lifecycle import set_shared_tags
from mlflow_dlaas.tuning.feasibility import (
    best_trials,
    closest_infeasible,
    is_feasible,
    violations,
)
from mlflow_dlaas.tuning.spec import StudySpec

log = logging.getLogger(__name__)
#: The study's user attribute naming its best feasible trial (or the Pareto front's).
BEST_ATTR = "best_feasible_trial"
NONE_FEASIBLE = "none: no complete trial met the constraints"


def trials_table(study: optuna.Study, spec: StudySpec) -> list[dict[str, Any]]:
    """One row per trial: number, state, framework, params, objective values, child runs."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        row: dict[str, Any] = {"trial": t.number, "state": t.state.name,
                               "framework": t.user_attrs.get("framework", "")}
        row.update({f"param.{k}": v for k, v in t.params.items() if k != "framework"})
        for objective, value in zip(spec.objectives, t.values or [], strict=False):
            row[objective.metric] = value
        if spec.constraints:
            row["feasible"] = is_feasible(t) if t.state == TrialState.COMPLETE else ""
            for c, v in zip(spec.constraints, violations(t), strict=False):
                row[f"violation[{c.metric} {c.op} {c.value:g}]"] = v
        row["mlflow_run_ids"] = ",".join(t.user_attrs.get("mlflow_run_ids", []))
        row["fail_reason"] = t.user_attrs.get("fail_reason", "")
        rows.append(row)
    return rows


def log_study_artifacts(study: optuna.Study, spec: StudySpec, parent_id: str) -> list[dict]:
    """Log the tables and plots to the parent run, and the best feasible trial as metric and
    tags; returns the best rows (none when no complete trial is feasible)."""
    import pandas as pd

    client = mlflow.MlflowClient()
    rows = trials_table(study, spec)
    numbers = {t.number for t in best_trials(study, spec)}
    best = [row for row in rows if row["trial"] in numbers]
    closest = closest_infeasible(study) if not best else None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        pd.DataFrame(rows).to_csv(out / "trials.csv", index=False)
        if best:
            name = "pareto_front.csv" if spec.multi_objective else "best_trial.csv"
            pd.DataFrame(best).to_csv(out / name, index=False)
        elif closest is not None:
            pd.DataFrame([r for r in rows if r["trial"] == closest.number]).to_csv(
                out / "closest_trial.csv", index=False)
        _plots(study, spec, out)
        client.log_artifacts(parent_id, str(out), "study")
    if spec.constraints:
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        client.log_metric(parent_id, "trials_feasible", sum(map(is_feasible, complete)))
    _tag_best(client, study, spec, parent_id, best, closest)
    return best


def _tag_best(client: mlflow.MlflowClient, study: optuna.Study, spec: StudySpec,
              parent_id: str, best: list[dict[str, Any]], closest: FrozenTrial | None) -> None:
    """``best_<metric>`` (in the metric's section: ``Headline/best_train_time_seconds``)
    and ``dlaas.best_trial`` / ``dlaas.best_run_ids`` for the best
    feasible trial; with none feasible, ``dlaas.best_trial`` says so and
    ``dlaas.closest_trial`` names the nearest miss. The study's user attribute
    ``best_feasible_trial`` says the same in optuna-dashboard."""
    if best and not spec.multi_objective:
        row = best[0]
        section, _, name = spec.objectives[0].metric.rpartition("/")
        client.log_metric(parent_id, f"{section}/best_{name}" if section else f"best_{name}",
                          float(row[spec.objectives[0].metric]))
        set_shared_tags(client, parent_id, {BEST_TRIAL_TAG: str(row["trial"]),
                                            BEST_RUN_IDS_TAG: row["mlflow_run_ids"]})
        study.set_user_attr(BEST_ATTR, row["trial"])
    elif best:
        study.set_user_attr(BEST_ATTR, [row["trial"] for row in best])
    elif closest is not None:
        set_shared_tags(client, parent_id, {BEST_TRIAL_TAG: NONE_FEASIBLE,
                                            CLOSEST_TRIAL_TAG: str(closest.number)})
        study.set_user_attr(BEST_ATTR, NONE_FEASIBLE)


def _plots(study: optuna.Study, spec: StudySpec, out: Path) -> None:
    """Optuna's matplotlib plots; a plot that does not apply (too few trials) is skipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as ovm

    names = [o.metric for o in spec.objectives]
    plots = {
        "parallel_coordinates": lambda: ovm.plot_parallel_coordinate(
            study, target=(lambda t: t.values[0]) if spec.multi_objective else None,
            target_name=names[0]),
    }
    if spec.multi_objective:
        plots["pareto_front"] = lambda: ovm.plot_pareto_front(study, target_names=names)
        for i, metric in enumerate(names):
            plots[f"optimization_history_{i}"] = (
                lambda i=i, metric=metric: ovm.plot_optimization_history(
                    study, target=lambda t: t.values[i], target_name=metric))
    else:
        plots["optimization_history"] = lambda: ovm.plot_optimization_history(
            study, target_name=names[0])
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if len(complete) >= 2:  # Optuna warns, and draws equal bars, for fewer
            plots["param_importances"] = lambda: ovm.plot_param_importances(study)
    for name, draw in plots.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                axes = draw()
            figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
            figure.savefig(out / f"{name}.png", dpi=100, bbox_inches="tight")
            plt.close(figure)
        except (ValueError, RuntimeError, ZeroDivisionError, IndexError) as e:
            log.info("study plot %s skipped: %s", name, e)


def best_lines(best: list[dict[str, Any]]) -> list[str]:
    """The console's ``best:`` lines, figures at 3 significant digits; first a warning where
    every run behind them was disturbed by other work on the machine (their figures are then
    not comparable with a quiet machine's)."""
    run_ids = [r for row in best for r in str(row.get("mlflow_run_ids", "")).split(",") if r]
    client = mlflow.MlflowClient()
    validity = []
    for run_id in run_ids:
        try:
            validity.append(client.get_run(run_id).data.tags.get(VALIDITY_TAG, ""))
        except Exception:  # a run the store lost: said nowhere else either
            validity.append("")
    lines = []
    if validity and all(v == "disturbed" for v in validity):
        lines.append("mlflow-dlaas: warning: every run behind the best trial was disturbed by "
                     "other work on this machine, so its figures compare with nothing "
                     "measured quietly; rerun the study on a quiet machine")
    for row in best:
        shown = ", ".join(f"{k}={significant(v) if isinstance(v, float) else v}"
                          for k, v in row.items() if v != "" and k != "mlflow_run_ids")
        lines.append(f"best: {shown}")
    return lines
