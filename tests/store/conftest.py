"""Fixtures of the store tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import OwnPostgres


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    """A PostgreSQL server of this test's own, which it may freeze; stopped after."""
    own = OwnPostgres()
    try:
        yield own
    finally:
        own.stop()
