"""Assembles the core over its storage: the one place that decides which backend serves.

The gRPC server (server.py) and offline commands (cli.py `migrate`) both open an App, so
the wiring is written once.
"""

from __future__ import annotations

from dataclasses import dataclass

from memsvc.config import Config
from memsvc.core.background import BackgroundWriter
from memsvc.core.engine import Engine
from memsvc.core.memories import Memories
from memsvc.core.settings import Settings
from memsvc.storage.database import Database
from memsvc.storage.settings_store import SqliteSettingsStore
from memsvc.storage.sqlite_backend import SqliteMemoryBackend


@dataclass
class App:
    config: Config
    database: Database
    backend: SqliteMemoryBackend
    memories: Memories
    settings: Settings
    engine: Engine
    background: BackgroundWriter

    @classmethod
    def open(cls, config: Config) -> "App":
        """Open the database and apply migrations (refusing a schema newer than the code)."""
        database = Database(config.db_path, synchronous=config.sqlite_synchronous.upper())
        backend = SqliteMemoryBackend(database)
        try:
            backend.initialize()
        except BaseException:
            database.close()
            raise
        settings = Settings(SqliteSettingsStore(database))
        background = BackgroundWriter()
        return cls(config=config, database=database, backend=backend, memories=Memories(backend),
                   settings=settings, engine=Engine(backend, settings, background), background=background)

    def close(self) -> None:
        """Finish acknowledged background writes, then close the database."""
        self.background.drain()
        self.backend.shutdown()
