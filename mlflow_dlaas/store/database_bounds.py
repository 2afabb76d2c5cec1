"""Every wait for a database server has a limit, not only connecting.

Three bounds, for the tracking store and a study's storage alike:

- the server's own: PostgreSQL ends a statement after :data:`STATEMENT_WITHIN_S` and a lock
  wait after :data:`LOCK_WITHIN_S` (``statement_timeout``, ``lock_timeout``), given to every
  connection of this process and its children through libpq's ``PGOPTIONS`` (MLflow opens its
  engine itself) and to the engines we open through their connect arguments;
- the network's: TCP keep-alives for the connections we open;
- ours, for a server that stopped answering altogether (paused, its host frozen: nothing it
  would enforce runs): every psycopg connection SQLAlchemy opens here (MLflow's engine and
  Optuna's alike, through SQLAlchemy's ``do_connect`` event) waits at most
  :data:`NO_REPLY_WITHIN_S` for a reply, then closes and raises. A server found silent so
  is remembered: until a new connection to it succeeds, every wait on it here (a new
  connection, a statement) is :data:`SILENT_RECHECK_S`, so that a command pays the full
  bound once, not once per call (a study's storage and its tracking store are often one
  server). Only a connection proves it answers: a statement's wait may end without a word
  from the server (setting autocommit).
"""

from __future__ import annotations

import functools
import math
import os
import threading
from typing import Any
from urllib.parse import urlsplit

#: What a statement may take on the server (PostgreSQL cancels it then).
STATEMENT_WITHIN_S = 20
#: How long a statement may wait for a lock another session holds.
LOCK_WITHIN_S = 10
#: How long a statement may go without any reply before the connection gives up: the server's
#: own bound plus a margin, so that a live server always speaks first.
NO_REPLY_WITHIN_S = STATEMENT_WITHIN_S + 10
#: How long a wait on a server already found silent may take (libpq's minimum connect timeout).
SILENT_RECHECK_S = 2
#: A connection's bound where the caller gave none (psycopg's own default is 130 s).
CONNECT_WITHIN_S = 10
POSTGRES_SCHEMES = ("postgresql", "postgres")
#: libpq's variable for options given to every connection it opens.
PGOPTIONS_ENV = "PGOPTIONS"
NO_REPLY_MESSAGE = "the database server sent no reply"
#: What a driver says when the database server is down or was stopped (PostgreSQL, MySQL).
GONE_WORDS = ("connection refused", "server closed the connection unexpectedly",
              "terminating connection due to administrator command", "connection reset",
              "the database system is shutting down", "can't connect to mysql server",
              "lost connection to mysql server")
#: The packages whose errors are a database's (a tracking *server's* refusal is not).
DATABASE_DRIVERS = ("psycopg", "psycopg2", "sqlalchemy", "pymysql", "MySQLdb")


def is_postgres(uri: str) -> bool:
    """Whether ``uri`` names a PostgreSQL database (any SQLAlchemy driver suffix)."""
    return urlsplit(uri).scheme.split("+", 1)[0] in POSTGRES_SCHEMES


def postgres_options() -> str:
    """The server-side bounds, as libpq options."""
    return (f"-c statement_timeout={STATEMENT_WITHIN_S * 1000} "
            f"-c lock_timeout={LOCK_WITHIN_S * 1000}")


def connect_args(uri: str, connect_within_s: float) -> dict[str, Any]:
    """The driver's connect arguments for an engine we open on ``uri``: a bound on opening
    the connection (a server that accepts the socket and never answers would hold the driver
    for minutes) and, for PostgreSQL, the statement and lock bounds and TCP keep-alives."""
    scheme = urlsplit(uri).scheme.split("+", 1)[0]
    args: dict[str, Any] = {}
    if scheme in (*POSTGRES_SCHEMES, "mysql"):
        args["connect_timeout"] = max(1, math.ceil(connect_within_s))
    if scheme in POSTGRES_SCHEMES:
        args.update(options=postgres_options(), keepalives=1, keepalives_idle=10,
                    keepalives_interval=5, keepalives_count=3)
    return args


def bound_database_waits(uri: str) -> None:
    """For a PostgreSQL ``uri``: give every connection this process and its children open
    the server-side bounds (``PGOPTIONS``, kept where the user set them) and start the
    reply bound here. Other stores are left alone."""
    if not is_postgres(uri):
        return
    present = os.environ.get(PGOPTIONS_ENV, "")
    if "statement_timeout" not in present and "lock_timeout" not in present:
        os.environ[PGOPTIONS_ENV] = f"{present} {postgres_options()}".strip()
    bound_replies()


_BOUND = threading.Lock()
_bounded: list[bool] = []


def bound_replies() -> None:
    """Make every psycopg connection this process opens through SQLAlchemy give up on a
    reply after :data:`NO_REPLY_WITHIN_S` (once per process)."""
    with _BOUND:
        if _bounded:
            return
        _bounded.append(True)
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    event.listen(Engine, "do_connect", _connect_with_bound)


_SILENT = threading.Lock()
#: servers (host, port) that last gave no reply, until a new connection to one succeeds
_silent_servers: set[tuple[str, str]] = set()


def _server_of(cparams: dict[str, Any]) -> tuple[str, str]:
    return str(cparams.get("host") or ""), str(cparams.get("port") or "5432")


def is_silent(server: tuple[str, str]) -> bool:
    """Whether ``server`` gave no reply to this process's last wait on it."""
    with _SILENT:
        return server in _silent_servers


def _mark(server: tuple[str, str], silent: bool) -> None:
    with _SILENT:
        if silent:
            _silent_servers.add(server)
        else:
            _silent_servers.discard(server)


def _connect_with_bound(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
    if dialect.driver != "psycopg" or getattr(dialect, "is_async", False):
        return None  # another driver: the server-side bounds only
    import psycopg

    server = _server_of(cparams)
    given = float(cparams.get("connect_timeout") or CONNECT_WITHIN_S)
    bound = min(given, SILENT_RECHECK_S) if is_silent(server) else given
    try:
        connection = _no_reply_bound_class().connect(
            *cargs, **{**cparams, "connect_timeout": max(2, math.ceil(bound))})
    except psycopg.errors.ConnectionTimeout:
        _mark(server, True)
        raise
    connection.dlaas_server = server
    _mark(server, False)
    return connection


@functools.cache
def _no_reply_bound_class() -> type:
    import psycopg

    wait_timeout = getattr(psycopg.errors, "_WaitTimeout", psycopg.errors.OperationalError)

    class NoReplyBoundConnection(psycopg.Connection):
        """A psycopg connection whose every wait for the server has a limit."""

        dlaas_server: tuple[str, str] = ("", "")

        def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
            bound = SILENT_RECHECK_S if is_silent(self.dlaas_server) else NO_REPLY_WITHIN_S
            try:
                return super().wait(gen, interval, bound if timeout is None else timeout)
            except wait_timeout:
                _mark(self.dlaas_server, True)
                self.close()  # mid-protocol: never to be used again
                raise psycopg.OperationalError(
                    f"{NO_REPLY_MESSAGE} within {NO_REPLY_WITHIN_S} s") from None

    return NoReplyBoundConnection


def stalled_database_reason(error: BaseException) -> str | None:
    """What the database server did, in words ("stopped answering ...", "went away
    (connection refused)"), when ``error`` or its cause is one of the bounds above ending a
    wait or a database driver finding its server gone; else None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).lower()
        if "lock timeout" in text:
            return (f"ended a statement that waited for a lock longer than {LOCK_WITHIN_S} s "
                    "(another session holds it)")
        if "statement timeout" in text:
            return f"ended a statement that ran longer than {STATEMENT_WITHIN_S} s"
        if NO_REPLY_MESSAGE in text or "connection timeout expired" in text:
            return (f"stopped answering (no reply to a statement within {NO_REPLY_WITHIN_S} s, "
                    "nor to a new connection within its connect timeout)")
        gone = next((words for words in GONE_WORDS if words in text), None)
        if gone is not None and type(current).__module__.split(".")[0] in DATABASE_DRIVERS:
            return f"went away ({gone})"
        current = current.__cause__ or current.__context__
    return None
