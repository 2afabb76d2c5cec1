"""A trial's note in optuna-dashboard: links to its MLflow runs, its settings, its objective
values and its constraint values, with those it missed.

optuna-dashboard shows user attributes as plain text; a note (Markdown) is what it renders
with clickable links. Written where the ``dashboard`` extra is installed, else skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import optuna

from mlflow_dlaas.tuning.spec import StudySpec


def trial_note(spec: StudySpec, params: Mapping[str, object], runs: Sequence[tuple[str, str]],
               values: Sequence[float], observed: Sequence[float]) -> str:
    """The note's Markdown; ``runs``: (run id, MLflow UI link) per replicate; ``observed``:
    each constraint's measured value (medians over replicates)."""
    lines = ["**MLflow runs**: " + ", ".join(f"[{run_id[:8]}]({url})" for run_id, url in runs),
             "", "**Settings**: " + ", ".join(f"`{k}={v}`" for k, v in sorted(params.items())),
             "", "**Objectives**: " + ", ".join(
                 f"{o.metric} ({o.direction}) {v:.4g}"
                 for o, v in zip(spec.objectives, values, strict=False))]
    if spec.constraints:
        lines += ["", "**Constraints**:"]
        for c, value in zip(spec.constraints, observed, strict=False):
            missed = c.violation(value)
            verdict = f"missed by {missed:.4g}" if missed > 0 else "met"
            lines.append(f"- {c.metric} {c.op} {c.value:g}: {value:.4g}, **{verdict}**")
    return "\n".join(lines)


def save_trial_note(trial: optuna.Trial, body: str) -> None:
    """Attach ``body`` to ``trial`` for optuna-dashboard, where it is installed."""
    try:
        from optuna_dashboard import save_note
    except ImportError:  # the dashboard extra is not installed: nobody would read it
        return
    save_note(trial, body)
