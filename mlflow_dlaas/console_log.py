"""What our processes print, through one logger tree (``mlflow_dlaas.*``) with its console
handler here: our own lines as plain text (``epoch 1: loss 0.2534 ...``), our warnings with
their source; libraries' INFO chatter (MLflow's store and Projects notes, Optuna's trial
lines, matplotlib's font cache) stays off the console unless :data:`VERBOSE_ENV` is set.
A module says something with ``console(__name__).info(...)``; the only direct writes to
stderr are the commands' one-line errors (``cli.py``, ``errors.exit_code_of``)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

#: Set (to anything but 0) to see every library's INFO lines and the measured worker's whole
#: output on the console; the worker's output is always in the run's log artifact.
VERBOSE_ENV = "MLFLOW_DLAAS_VERBOSE"
#: MLflow's INFO loggers whose lines ours say better (the store's table creation, each
#: Projects run's "=== Running command ..." lines).
LIBRARY_CHATTER = ("mlflow.projects.utils",
                   "mlflow.projects.backend.local", "mlflow.utils.virtualenv")
_OURS = ("__main__", "mlflow_dlaas")


def verbose() -> bool:
    """Whether the user asked for every library's lines (:data:`VERBOSE_ENV`)."""
    return os.environ.get(VERBOSE_ENV, "0") not in ("", "0")


#: SQLAlchemy's connection pool logs, with a traceback, a cursor it could not close on a
#: connection a stop (SIGTERM, Ctrl-C) has already closed: cleanup, never a lost result (a
#: failing query raises where it is made).
POOL_CLEANUP = "sqlalchemy.pool"
#: MLflow's database store logs, with a 60-line traceback, every database error it then
#: raises (a lock timeout, a lost server): the raise is where we say it, in one line. Its
#: INFO lines (table creation) ours say better.
STORE_ECHO = "mlflow.store.db.utils"


def quiet_library_chatter() -> None:
    """MLflow's INFO chatter to WARNING, and SQLAlchemy's pool-cleanup errors and MLflow's
    echo of the database errors it raises off the console, unless :func:`verbose`."""
    if not verbose():
        for name in LIBRARY_CHATTER:
            logging.getLogger(name).setLevel(logging.WARNING)
        for name in (POOL_CLEANUP, STORE_ECHO):
            logging.getLogger(name).setLevel(logging.CRITICAL)


class _ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        if record.levelno == logging.INFO and record.name.startswith(_OURS):
            return record.getMessage()
        return super().format(record)


#: the root of our logger tree
TREE = "mlflow_dlaas"
_FORMAT = "%(levelname)s %(name)s: %(message)s"


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a line is written (a redirected or captured
    stderr included), flushing each line."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def console(name: str) -> logging.Logger:
    """The logger of module ``name`` (``__name__``; a module run as ``__main__`` joins the
    tree as ``mlflow_dlaas.__main__``), whose lines reach stderr in any process of ours,
    whether or not it configured logging: the tree's own handler writes them, once."""
    tree = logging.getLogger(TREE)
    if not any(isinstance(h, _Stderr) for h in tree.handlers):
        handler = _Stderr()
        handler.setFormatter(_ConsoleFormatter(_FORMAT))
        tree.addHandler(handler)
        tree.setLevel(logging.INFO)
        tree.propagate = False  # written here once, not again by a root handler
    return logging.getLogger(name if name.startswith(TREE) else f"{TREE}.{name}")


def configure_console_logging() -> None:
    """Our INFO lines, plain, and every logger's warnings, with their source, to stderr;
    others' INFO lines too when :func:`verbose`."""
    console(TREE)  # our tree writes its own lines
    handler = logging.StreamHandler()
    handler.setFormatter(_ConsoleFormatter(_FORMAT))
    logging.basicConfig(level=logging.INFO if verbose() else logging.WARNING,
                        handlers=[handler])
    for name in _OURS:
        logging.getLogger(name).setLevel(logging.INFO)
    quiet_library_chatter()


@contextlib.contextmanager
def native_chatter_off() -> Iterator[None]:
    """Within the block, what native code writes to stderr (TensorFlow's absl banners at
    import: "oneDNN custom operations are on", ...) is dropped, unless :func:`verbose`;
    Python's own ``sys.stderr`` writes go on as before."""
    if verbose():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
