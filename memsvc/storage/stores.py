"""The one place that opens the configured store: SQLite under the data dir (the default),
or the PostgreSQL of MEMSVC_DATABASE_URL that several memsvc replicas share.

Why a factory: the server (App.open), the parent of several server processes, `memsvc
migrate` and `memsvc tokens` all need the same stores for the same configuration, and the
engine above them must not know which one it got. Every store here has the same methods on
both databases; what only one of them has (the SQLite file's size, sqlite-vec's version) is
described by `StoreInfo`, so callers report it without asking which store they hold.

Caches across replicas, with PostgreSQL:
- the memories read cache compares `database.data_version()` (PostgreSQL: a change counter
  that every committed write to memories bumps), so a write through another replica is seen
  on the next read;
- the settings caches compare `settings_version()`, a counter the same transaction as
  every settings write bumps, read from the shared database on each access;
- the verified-credentials cache compares the credentials' change counter (the same
  transaction as every create and revoke bumps it), read on each request, so a revocation
  through any replica holds from the next request through every other;
- vectors are searched in the database itself (pgvector's index), so there is no
  per-process matrix cache (the sqlite-vec tier's per-owner cache) that could go stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from memsvc.config import Config, ConfigError, check_database_options
from memsvc.storage.credentials import SqlCredentialStore
from memsvc.storage.leases import SqlLeaseStore
from memsvc.storage.settings_store import SqlSettingsStore

#: The extra that installs the PostgreSQL client (pyproject.toml), and the modules it brings.
POSTGRES_EXTRA = "postgres"
_POSTGRES_MODULES = ("psycopg", "psycopg_pool", "pgvector")


@dataclass(frozen=True)
class StoreInfo:
    """What a status line, /metrics or the CLI reports about the store."""

    #: "sqlite" or "postgresql".
    kind: str
    #: The SQLite file, or the URL without its password.
    location: str
    #: The SQLite file (for its size on disk); None for PostgreSQL, whose files are the server's.
    db_path: str | None
    #: "sqlite-vec" or "pgvector".
    vector_name: str
    #: What answers keyword search (GetEngineStatus keyword.backend).
    keyword_name: str

    @property
    def backend_name(self) -> str:
        """The built-in store as Retrieve's resolution.backend and the engine status's backend
        type name it: "sqlite" or "postgres" (the settings name "sqlite" means it on both)."""
        return "postgres" if self.kind == "postgresql" else "sqlite"


@dataclass
class AdminStores:
    """The stores that need no schema of memories loaded: migrations, settings,
    credentials, leases. What the parent of several processes and the CLI open."""

    info: StoreInfo
    database: Any
    settings_store: Any
    credential_store: Any
    lease_store: Any
    _migrate: Callable[[], list[int]]
    _version: Callable[[], int]
    _vector_version: Callable[[], str]

    def migrate(self) -> list[int]:
        """Apply the store's migrations (idempotent; refuses a schema newer than the code)."""
        return self._migrate()

    def schema_version(self) -> int:
        return self._version()

    def vector_version(self) -> str:
        """The vector extension's version, or why it is unavailable (reported, never raised)."""
        try:
            return self._vector_version()
        except Exception as exc:  # noqa: BLE001 - a status line, not a request
            return f"unavailable: {type(exc).__name__}: {exc}"

    def started_fields(self) -> dict[str, str]:
        """The store's part of the `server.started` log line: which store, where (a URL
        without its password) and its vector extension's version, under that extension's name."""
        return {
            "store": self.info.kind,
            "database": self.info.location,
            self.info.vector_name.replace("-", "_"): self.vector_version(),
        }

    def close(self) -> None:
        self.database.close()


@dataclass
class Stores(AdminStores):
    """Everything App.open wires the engine over: the admin stores plus the memory backend
    (schema applied) and the tier-1 vector index."""

    backend: Any = None
    vector_index: Any = None


def open_admin(config: Config) -> AdminStores:
    """The configured store's database and admin stores; nothing is migrated yet.
    ConfigError for a database URL that is not PostgreSQL's (commands that do not
    validate the whole configuration open stores too)."""
    check_database_options(config)
    if config.database_url is not None:
        return _postgres_admin(config)
    return _sqlite_admin(config)


def open_stores(config: Config) -> Stores:
    """The configured store, migrated, with its memory backend and vector index. The
    database is closed again if anything fails."""
    admin = open_admin(config)
    try:
        if admin.info.kind == "postgresql":
            backend, index = _postgres_memory(config, admin.database)
        else:
            backend, index = _sqlite_memory(config, admin.database)
        backend.initialize()
    except BaseException:
        admin.close()
        raise
    return Stores(
        **{name: getattr(admin, name) for name in AdminStores.__dataclass_fields__}, backend=backend, vector_index=index
    )


def _sqlite_admin(config: Config) -> AdminStores:
    from memsvc.storage import migrations
    from memsvc.storage.database import Database

    database = Database(config.db_path, synchronous=config.sqlite_synchronous.upper(), cache_mb=config.sqlite_cache_mb)
    info = StoreInfo("sqlite", str(config.db_path), str(config.db_path), "sqlite-vec", "FTS5")
    return _admin_stores(
        info, database, migrations, lambda: database.vec_version or f"unavailable: {database.vec_error}"
    )


def _admin_stores(
    info: StoreInfo, database: Any, migrations: ModuleType, vec_version: Callable[[], str]
) -> AdminStores:
    """The stores every command needs, on either database; `migrations` is its migrations module."""
    return AdminStores(
        info,
        database,
        SqlSettingsStore(database),
        SqlCredentialStore(database),
        SqlLeaseStore(database),
        lambda: migrations.apply_migrations(database),
        lambda: migrations.current_version(database),
        vec_version,
    )


@contextmanager
def _postgres_client() -> Iterator[None]:
    """Turns a missing PostgreSQL client module into a ConfigError that names the extra to
    install (the CLI exits 2 with it): SQLite needs none of them, so a plain install lacks
    them, and a raw ModuleNotFoundError would not say what to do."""
    try:
        yield
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in _POSTGRES_MODULES:
            raise
        raise ConfigError(
            f"MEMSVC_DATABASE_URL (--database-url) needs the PostgreSQL client, and {missing} is not "
            f"installed: pip install 'memsvc[{POSTGRES_EXTRA}]'"
        ) from exc


def _postgres_admin(config: Config) -> AdminStores:
    with _postgres_client():
        from memsvc.storage.postgres import (
            migrations,
            pgvector,  # noqa: F401 - LocalVectorIndex's, imported here for the check
        )
        from memsvc.storage.postgres.database import PgDatabase
        from memsvc.storage.vector_index import LocalVectorIndex

    assert config.database_url is not None
    database = PgDatabase(config.database_url, max_size=config.database_pool_size)
    info = StoreInfo("postgresql", config.database_location, None, "pgvector", "PostgreSQL full-text search")
    probe = LocalVectorIndex(database)
    return _admin_stores(
        info, database, migrations, lambda: probe.vec_version or "unavailable: the server has no pgvector extension"
    )


def _sqlite_memory(config: Config, database: Any) -> tuple[Any, Any]:
    from memsvc.storage.memory_store import SqlMemoryBackend
    from memsvc.storage.sqlite_backend import SQLITE
    from memsvc.storage.vector_index import LocalVectorIndex

    backend = SqlMemoryBackend(database, SQLITE, working_set_bytes=config.working_set_mb * 1_000_000)
    index = LocalVectorIndex(
        database,
        quantization=config.vec_quantization,
        default_k=config.vec_top_k,
        cache_bytes=config.vec_cache_mb * 1_000_000,
        held_memories=backend.working_sets.memories_in_scope,
    )
    return backend, index


def _postgres_memory(config: Config, database: Any) -> tuple[Any, Any]:
    """MEMORY_VEC_QUANTIZATION shapes the sqlite-vec tier only (pgvector stores float32);
    MEMORY_VEC_CACHE_MB bounds the owners' vectors held in memory on either store."""
    from memsvc.storage.memory_store import SqlMemoryBackend

    with _postgres_client():
        from memsvc.storage.postgres import pgvector  # noqa: F401 - LocalVectorIndex's, imported here for the check
        from memsvc.storage.postgres.memory_backend import POSTGRES
        from memsvc.storage.vector_index import LocalVectorIndex

    backend = SqlMemoryBackend(database, POSTGRES, working_set_bytes=config.working_set_mb * 1_000_000)
    return backend, LocalVectorIndex(
        database,
        default_k=config.vec_top_k,
        cache_bytes=config.vec_cache_mb * 1_000_000,
        held_memories=backend.working_sets.memories_in_scope,
    )
