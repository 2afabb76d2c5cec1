"""What the parent run shows: best trial or Pareto front as a table, and Optuna's plots."""

from __future__ import annotations

import logging
import tempfile
import warnings
from pathlib import Path
from typing import Any

import mlflow
import optuna
from optuna.trial import TrialState

from mlflow_dlaas.tuning.spec import StudySpec

log = logging.getLogger(__name__)


def trials_table(study: optuna.Study, spec: StudySpec) -> list[dict[str, Any]]:
    """One row per trial: number, state, framework, params, objective values, child runs."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        row: dict[str, Any] = {"trial": t.number, "state": t.state.name,
                               "framework": t.user_attrs.get("framework", spec.frameworks[0])}
        row.update({f"param.{k}": v for k, v in t.params.items() if k != "framework"})
        for objective, value in zip(spec.objectives, t.values or [], strict=False):
            row[objective.metric] = value
        row["mlflow_run_ids"] = ",".join(t.user_attrs.get("mlflow_run_ids", []))
        row["fail_reason"] = t.user_attrs.get("fail_reason", "")
        rows.append(row)
    return rows


def best_rows(study: optuna.Study, spec: StudySpec) -> list[dict[str, Any]]:
    """The best trial (one objective) or the Pareto front (several); feasible ones only."""
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    if not complete:
        return []
    feasible_numbers = {t.number for t in complete
                        if all(v <= 0 for v in t.user_attrs.get("dlaas_constraint_violations",
                                                                  [0.0]))}
    best = [t for t in study.best_trials if t.number in feasible_numbers]
    numbers = {t.number for t in best}
    return [row for row in trials_table(study, spec) if row["trial"] in numbers]


def log_study_artifacts(study: optuna.Study, spec: StudySpec, parent_id: str) -> list[dict]:
    """Log the tables and plots to the parent run; returns the best rows."""
    import pandas as pd

    client = mlflow.MlflowClient()
    best = best_rows(study, spec)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        pd.DataFrame(trials_table(study, spec)).to_csv(out / "trials.csv", index=False)
        name = "pareto_front.csv" if spec.multi_objective else "best_trial.csv"
        pd.DataFrame(best).to_csv(out / name, index=False)
        _plots(study, spec, out)
        client.log_artifacts(parent_id, str(out), "study")
    if best and not spec.multi_objective:
        row = best[0]
        client.log_metric(parent_id, f"best_{spec.objectives[0].metric}",
                          float(row[spec.objectives[0].metric]))
        client.set_tag(parent_id, "dlaas.best_trial", str(row["trial"]))
        client.set_tag(parent_id, "dlaas.best_run_ids", row["mlflow_run_ids"])
    return best


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
