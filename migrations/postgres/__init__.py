"""Numbered PostgreSQL schema migrations (NNNN_name.sql), applied in order by
memsvc.storage.postgres.migrations."""
