"""Where a study lives: embedded SQLite or journal file, PostgreSQL, or a Redis journal."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import optuna

from mlflow_dlaas.errors import ConfigError, TrackingUnavailableError
from mlflow_dlaas.redaction import redact_text, redact_uri
from mlflow_dlaas.store.database_bounds import bound_database_waits, connect_args
from mlflow_dlaas.store.store_lock import first_use_lock, sqlite_path, wait_for_sqlite_locks
from mlflow_dlaas.store.tracking import CONNECT_WITHIN_S, check_reachable

EMBEDDED_SQLITE = "optuna.db"
EMBEDDED_JOURNAL = "optuna-journal.log"
#: The database kinds Optuna's RDB storage opens here.
RDB_KINDS = ("sqlite", "postgresql", "mysql")
#: What to do when a study's database does not answer.
STORAGE_FIX = "start it or give another --storage"


def make_storage(url: str | None) -> tuple[optuna.storages.BaseStorage, str]:
    """The Optuna storage for ``url`` and a printable description (password hidden).

    ``None``: SQLite ``./optuna.db`` (one worker). ``journal`` or ``journal:PATH``: Optuna's
    journal file, for several workers on one machine. ``sqlite:///``, ``postgresql://``,
    ``mysql://``: Optuna's RDB storage. ``redis://``: a journal in Redis, for many machines.
    """
    url = absolute_url(url)
    check_storage_url(url)
    if url.startswith("journal:"):
        path = url.partition(":")[2]
        return _journal_file(Path(path)), f"journal file {path}"
    if url.startswith("redis://") or url.startswith("rediss://"):
        return _redis_journal(url), f"Redis journal {redact_uri(url)}"
    return _rdb_storage(url), f"database {redact_uri(url)}"


def check_storage_url(url: str | None) -> None:
    """ConfigError, before anything is made, for a storage URL of an unknown kind or a
    SQLite file in a folder that does not exist (a typo would otherwise make the folder)."""
    url = absolute_url(url)
    kind = url.split(":", 1)[0].split("+", 1)[0]
    if not url.startswith("journal:") and kind not in RDB_KINDS + ("redis", "rediss"):
        raise ConfigError(f"unknown study storage {redact_uri(url)!r}; use journal[:PATH], "
                          "sqlite:///PATH, postgresql://..., mysql://... or redis://...")
    path = sqlite_path(url)
    if path is not None and not path.parent.is_dir():
        raise ConfigError(f"--storage {redact_uri(url)}: the folder {path.parent} does not "
                          "exist; create it, or give a file in a folder that does")


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


def _journal_file(path: Path) -> optuna.storages.JournalStorage:
    """Optuna's journal file at ``path``: a regular file (new or Optuna's), in a folder that
    exists, or :class:`ConfigError` saying which it is not."""
    fix = "give --storage journal:PATH a new or existing Optuna journal file"
    if path.exists() and not path.is_file():
        raise ConfigError(f"--storage journal:{path}: not a regular file (a device, a folder "
                          f"or a pipe); {fix}")
    if not path.parent.is_dir():
        raise ConfigError(f"--storage journal:{path}: the folder {path.parent} does not exist; "
                          f"create it or {fix}")
    try:
        backend = optuna.storages.journal.JournalFileBackend(str(path))
        return optuna.storages.JournalStorage(backend)
    except (ValueError, KeyError, TypeError) as e:  # a file that is not Optuna's journal
        raise ConfigError(f"--storage journal:{path}: not an Optuna journal file "
                          f"({type(e).__name__}: {str(e)[:120]}); {fix}") from None
    except OSError as e:
        raise ConfigError(f"--storage journal:{path}: {e.strerror or e}; {fix}") from None


def _redis_journal(url: str) -> optuna.storages.JournalStorage:
    """Optuna's journal in the Redis server of ``url``, whose every connection and command
    waits at most :data:`CONNECT_WITHIN_S` (redis-py waits for ever by default)."""
    try:
        import redis
    except ImportError as e:
        raise ConfigError("a Redis journal needs the redis package: "
                          "pip install 'mlflow-dlaas[redis]'") from e
    check_reachable(url, role="study storage", fix=STORAGE_FIX)
    bounded = with_query_defaults(url, socket_connect_timeout=CONNECT_WITHIN_S,
                                  socket_timeout=CONNECT_WITHIN_S)
    try:
        redis.Redis.from_url(bounded).ping()
    except redis.RedisError as e:
        raise TrackingUnavailableError(
            f"the study storage {redact_uri(url)} did not answer a PING within "
            f"{CONNECT_WITHIN_S:.0f} s ({redact_text(str(e)).splitlines()[0]}); "
            f"{STORAGE_FIX}") from None
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalRedisBackend(bounded))


def with_query_defaults(url: str, **defaults: float) -> str:
    """``url`` with each of ``defaults`` added to its query unless the URL sets it."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query = {**{k: f"{v:g}" for k, v in defaults.items()}, **query}
    return urlunsplit(parts._replace(query=urlencode(query)))


def _rdb_storage(url: str, attempts: int = 5) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage; workers starting together on a fresh database race to create
    its tables and all but one see 'already exists': a SQLite file is opened under a file
    lock, a database server with retries."""
    path = sqlite_path(url)
    if path is None:  # a database server: it answers within the bound, or we say so
        check_reachable(url, role="study storage", fix=STORAGE_FIX)
        bound_database_waits(url)
    else:
        wait_for_sqlite_locks()
    engine_kwargs = {"pool_pre_ping": True, "connect_args": connect_args(url, CONNECT_WITHIN_S)}
    for attempt in range(1, attempts + 1):
        try:
            with first_use_lock(path) if path else contextlib.nullcontext():
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
        except ImportError as e:
            raise ConfigError(f"the database driver for {url.split(':', 1)[0]} is missing: "
                              "pip install 'mlflow-dlaas[postgres]'") from e
        except Exception as e:
            if attempt == attempts:
                said = redact_text(str(getattr(e, "orig", None) or e)).strip().splitlines()
                raise ConfigError(f"cannot open study storage {redact_uri(url)}: "
                                  f"{said[0] if said else type(e).__name__}") from None
            time.sleep(0.5 * attempt)
    raise ConfigError(f"cannot open study storage {redact_uri(url)}")  # attempts < 1
