"""In MLflow's own ``mlflow run`` process: the run it made does not stay RUNNING when that
process dies before our entry point has taken the run over.

``mlflow run`` creates the run, logs its params, then starts the entry point, which tags the
run with its owner (:mod:`mlflow_dlaas.store.ownership`) so that a later sweep can end it.
Between the two, MLflow's process may die: a param name MLflow refuses (``-P 'a;b=1'``
raises after the run exists) or a SIGTERM / SIGHUP (``timeout -s TERM 3.5 mlflow run ...``).
The run then had no owner for the sweep and stayed RUNNING for ever.

MLflow offers no hook in its CLI process but its run context providers, which it makes when
it is imported (ours: :class:`mlflow_dlaas.run_context.DlaasRunContextProvider`): there we
install an exception hook and signal handlers. The run is found in the dying process's
frames (a local of MLflow's that holds a run): the CLI keeps it nowhere else. A signal's run
is ended by a fresh process once this one is gone (:mod:`mlflow_dlaas.store.end_after_exit`):
the signal may have cut a write of MLflow's short, whose database lock only the exit frees.

The other side of that race: an entry point that was already starting when ``mlflow run``
died found its run ended and no owner. It names ``mlflow run`` among its launchers
(:func:`mlflow_dlaas.store.ownership.launcher_environment`), so it stops as soon as it sees
that process gone, and it refuses a run that ended before it took it over.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, TracebackType

from mlflow_dlaas.console_log import console
from mlflow_dlaas.store.ownership import Owner, launcher_environment

log = console(__name__)

#: The signals that end ``mlflow run`` without Python's cleanup (SIGINT is MLflow's own:
#: it cancels the run KILLED itself).
GUARDED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def is_mlflow_run_cli(argv: list[str]) -> bool:
    """Whether this process is MLflow's ``mlflow run`` command."""
    program = Path(argv[0]).name if argv else ""
    via_module = program == "__main__.py" and Path(argv[0]).parent.name == "mlflow"
    return (program == "mlflow" or via_module) and argv[1:2] == ["run"]


def runs_our_project(argv: list[str]) -> bool:
    """Whether this process is ``mlflow run`` of one of our MLflow Projects: only there do we
    act in MLflow's process (a user's own project runs exactly as without mlflow-dlaas)."""
    from mlflow_dlaas.project_paths import is_our_project

    return is_mlflow_run_cli(argv) and any(
        is_our_project(arg) for arg in argv[2:] if not arg.startswith("-"))


def guard_mlflow_run_cli() -> None:
    """In ``mlflow run`` of our project: end its run (FAILED on an error, KILLED on a
    signal) if it dies before the entry point has tagged the run as its own."""
    previous_hook = sys.excepthook

    def on_error(kind: type[BaseException], error: BaseException,
                 trace: TracebackType | None) -> None:
        said = (str(error).strip().splitlines() or [""])[0][:500]
        _end_untaken(_run_in(_frames_of(trace)), "FAILED",
                     f"mlflow run failed before the entry point started: {kind.__name__}: "
                     f"{said}")
        previous_hook(kind, error, trace)

    sys.excepthook = on_error
    os.environ.update(launcher_environment())  # the entry point MLflow starts dies with us
    for signum in GUARDED_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _on_signal)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """End the run from a fresh process once this one has died of the signal: the signal
    may have cut one of MLflow's own writes short, whose lock this process holds until it
    exits (ending the run from here waited for that lock, then left the run RUNNING)."""
    name = signal.Signals(signum).name
    run_id = _run_in(_stack_of(frame))
    reason = f"mlflow run was stopped by {name} before the entry point took the run over"
    if run_id is not None:
        import mlflow

        from mlflow_dlaas.store.end_after_exit import end_after_exit

        if not end_after_exit(Owner.this_process(), run_id, "KILLED", reason,
                              mlflow.get_tracking_uri()):
            _end_untaken(run_id, "KILLED", reason)  # no process to be had: try from here
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # die of it, as without us


def _frames_of(trace: TracebackType | None) -> Iterator[FrameType]:
    while trace is not None:
        yield trace.tb_frame
        trace = trace.tb_next


def _stack_of(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def _run_in(frames: Iterator[FrameType]) -> str | None:
    """The id of the run MLflow's frames hold: any local that is a run (an ActiveRun, a Run)
    or a submitted run, whatever MLflow names it (``active_run``, ``submitted_run_obj``,
    ``self`` in the wait)."""
    from mlflow.entities import Run
    from mlflow.projects.submitted_run import SubmittedRun

    for frame in frames:
        for held in frame.f_locals.values():
            if isinstance(held, Run):
                return held.info.run_id
            if isinstance(held, SubmittedRun) and held.run_id:
                return held.run_id
    return None


def _end_untaken(run_id: str | None, status: str, reason: str) -> None:
    """End ``run_id`` with ``reason`` unless the entry point took it over (then it ends the
    run itself: it dies with its launcher) or it ended already."""
    if run_id is None:
        return
    # MLflow's SQL store logs a busy database's traceback before it raises: the retry says it
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    try:
        from mlflow_dlaas.redaction import redact_text
        from mlflow_dlaas.store.run_ending import end_if_running

        ended = end_if_running(run_id, status, reason, unless_owned=True)
    except Exception:  # the store may be what failed: the sweep cannot help, say so
        ended = None
    if ended:
        log.info(f"mlflow-dlaas: run {run_id} ended {status}: {redact_text(reason)}")
    elif ended is None:
        log.info(f"mlflow-dlaas: could not end run {run_id}; it stays RUNNING")
