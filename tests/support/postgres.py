"""A real PostgreSQL server with pgvector for tests: the package's local server
(memsvc.storage.postgres.local_server, which `memsvc cluster` runs too), with throwaway data in a
temporary folder on a free loopback port, always stopped and removed afterwards."""

from __future__ import annotations

from memsvc.storage.postgres.local_server import PostgresServer, free_port, install_dir, running_postgres  # noqa: F401 - re-exported
