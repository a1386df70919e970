"""The `settings` table of PostgreSQL as a key → JSON value store, namespaced
(`memory.maxTokens`), with a version counter that every write bumps so the settings cache of
every replica can tell it is stale: the same store as SQLite's, over the shared database."""

from __future__ import annotations

import json
from typing import Any, Mapping

from memsvc.storage.postgres.database import PgDatabase

_VERSION = "settings_version"


class PgSettingsStore:
    def __init__(self, db: PgDatabase):
        self.db = db

    def read_settings(self, namespace: str) -> dict[str, Any]:
        """Every stored value of the namespace (the column is `json`, so each one parsed;
        the server refused anything unparsable when it was written)."""
        prefix = namespace + "."
        with self.db.read() as conn:
            rows = conn.execute("SELECT key, value FROM settings WHERE starts_with(key, %s)", (prefix,)).fetchall()
        return {key[len(prefix):]: value for key, value in rows}

    def write_settings(self, namespace: str, values: Mapping[str, Any]) -> None:
        """All values and the version bump in one transaction."""
        with self.db.write() as conn:
            for name, value in values.items():
                conn.execute(
                    "INSERT INTO settings (key, value, updated_at) VALUES (%s, %s::json, now()) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    (f"{namespace}.{name}", json.dumps(value, ensure_ascii=False)))
            conn.execute("INSERT INTO sequences (name, value) VALUES (%s, 1) "
                         "ON CONFLICT (name) DO UPDATE SET value = sequences.value + 1", (_VERSION,))

    def settings_version(self) -> int:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM sequences WHERE name = %s", (_VERSION,)).fetchone()
        return int(row[0]) if row else 0
