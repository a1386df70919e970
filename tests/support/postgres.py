"""A real PostgreSQL server with pgvector for tests: the package's local server
(memsvc.local_postgres, which `memsvc cluster` runs too), with throwaway data in a
temporary folder on a free loopback port, always stopped and removed afterwards."""

from __future__ import annotations

from memsvc.local_postgres import PostgresServer, free_port, install_dir, running_postgres  # noqa: F401 - re-exported
