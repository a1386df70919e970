"""Assembles the core over its storage: the one place that decides which backend serves.

The gRPC server (server.py) and offline commands (cli.py `migrate`) both open an App, so
the wiring is written once.
"""

from __future__ import annotations

from dataclasses import dataclass

from memsvc.config import Config
from memsvc.core.memories import Memories
from memsvc.storage.database import Database
from memsvc.storage.sqlite_backend import SqliteMemoryBackend


@dataclass
class App:
    config: Config
    database: Database
    backend: SqliteMemoryBackend
    memories: Memories

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
        return cls(config=config, database=database, backend=backend, memories=Memories(backend))

    def close(self) -> None:
        self.backend.shutdown()
