"""Where a study lives: embedded SQLite or journal file, PostgreSQL, or a Redis journal."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import optuna

from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.store_lock import first_use_lock, sqlite_path
from mlflow_dlaas.tracking import redact_uri

EMBEDDED_SQLITE = "optuna.db"
EMBEDDED_JOURNAL = "optuna-journal.log"


def make_storage(url: str | None) -> tuple[optuna.storages.BaseStorage, str]:
    """The Optuna storage for ``url`` and a printable description (password hidden).

    ``None``: SQLite ``./optuna.db`` (one worker). ``journal`` or ``journal:PATH``: Optuna's
    journal file, for several workers on one machine. ``sqlite:///``, ``postgresql://``,
    ``mysql://``: Optuna's RDB storage. ``redis://``: a journal in Redis, for many machines.
    """
    url = absolute_url(url)
    if url.startswith("journal:"):
        path = url.partition(":")[2]
        backend = optuna.storages.journal.JournalFileBackend(path)
        return optuna.storages.JournalStorage(backend), f"journal file {path}"
    if url.startswith("redis://") or url.startswith("rediss://"):
        try:
            backend = optuna.storages.journal.JournalRedisBackend(url)
        except ImportError as e:
            raise ConfigError("a Redis journal needs the redis package: "
                              "pip install 'mlflow-dlaas[redis]'") from e
        return optuna.storages.JournalStorage(backend), f"Redis journal {redact_uri(url)}"
    if url.split(":", 1)[0].split("+", 1)[0] in ("sqlite", "postgresql", "mysql"):
        return _rdb_storage(url), f"database {redact_uri(url)}"
    raise ConfigError(f"unknown study storage {redact_uri(url)!r}; use journal[:PATH], "
                      "sqlite:///PATH, postgresql://..., mysql://... or redis://...")


def absolute_url(url: str | None) -> str:
    """``url`` with the default filled in and a local file's path made absolute, so that a
    process started elsewhere (a trial's entry point runs in its project's folder) opens the
    same storage."""
    if url is None:
        return f"sqlite:///{Path.cwd() / EMBEDDED_SQLITE}"
    if url == "journal" or url.startswith("journal:"):
        return f"journal:{Path(url.partition(':')[2] or EMBEDDED_JOURNAL).resolve()}"
    path = sqlite_path(url)
    if path is not None and not path.is_absolute():
        query = url.partition("?")[2]
        return f"sqlite:///{path.resolve()}" + (f"?{query}" if query else "")
    return url


def _rdb_storage(url: str, attempts: int = 5) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage; workers starting together on a fresh database race to create
    its tables and all but one see 'already exists': a SQLite file is opened under a file
    lock, a database server with retries."""
    path = sqlite_path(url)
    for attempt in range(1, attempts + 1):
        try:
            with first_use_lock(path) if path else contextlib.nullcontext():
                return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
        except ImportError as e:
            raise ConfigError(f"the database driver for {url.split(':', 1)[0]} is missing: "
                              "pip install 'mlflow-dlaas[postgres]'") from e
        except Exception as e:
            if attempt == attempts:
                raise ConfigError(f"cannot open study storage {redact_uri(url)}: {e}") from e
            time.sleep(0.5 * attempt)
    raise ConfigError(f"cannot open study storage {redact_uri(url)}")  # attempts < 1
