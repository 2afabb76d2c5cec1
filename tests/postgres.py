"""The PostgreSQL service the postgres-marked tests use: an admin connection and fresh
databases, dropped after; a test skips with the reason where none answers."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

POSTGRES_URL = os.environ.get("DLAAS_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432")


def admin_connection() -> Any:
    """An autocommit connection to the service's ``postgres`` database, or a skip."""
    psycopg = pytest.importorskip("psycopg", reason="psycopg missing (extra: postgres)")
    try:
        return psycopg.connect(f"{POSTGRES_URL}/postgres", connect_timeout=3, autocommit=True)
    except psycopg.OperationalError as e:
        pytest.skip(f"no PostgreSQL answers at {POSTGRES_URL} ({e}); set DLAAS_TEST_POSTGRES_URL")


@contextlib.contextmanager
def fresh_databases(*roles: str) -> Iterator[tuple[str, ...]]:
    """One new database per role (MLflow's and Optuna's both use alembic_version), their
    URLs yielded, dropped afterwards."""
    conn = admin_connection()
    names = [f"dlaas_{role}_{uuid.uuid4().hex[:8]}" for role in roles]
    with conn.cursor() as cur:
        for name in names:
            cur.execute(f"CREATE DATABASE {name}")
    try:
        yield tuple(f"{POSTGRES_URL}/{name}" for name in names)
    finally:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.close()
