"""Databases for the contract suites, one of each store, migrated and closed after the test:
`sqlite_database` (a file in the test's folder) and `pg_database` (a database of the test's
own on the run's real PostgreSQL, see `postgres_db_url`); and `own_server`, a PostgreSQL of
the test module's own for tests that stop or restart it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from memsvc.storage.database import Database
from memsvc.storage.migrations import apply_migrations

if TYPE_CHECKING:
    from support.postgres import PostgresServer

    from memsvc.storage.postgres.database import PgDatabase


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "memsvc.db")
    apply_migrations(db)
    yield db
    db.close()


@pytest.fixture
def pg_database(postgres_db_url: str) -> Iterator[PgDatabase]:
    """Imported when asked for, as the server fixture is: only these tests need psycopg."""
    from memsvc.storage.postgres.database import PgDatabase
    from memsvc.storage.postgres.migrations import apply_migrations as apply_pg_migrations

    db = PgDatabase(postgres_db_url)
    apply_pg_migrations(db)
    yield db
    db.close()


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    """A server of the module's own: stopping it must not fail other tests' databases."""
    from support.postgres import running_postgres

    with running_postgres() as server:
        yield server
