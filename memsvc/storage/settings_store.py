"""The `settings` table as a key → JSON value store, namespaced (`memory.maxTokens`), with a
version counter that every write bumps so the settings cache of every process (every replica
of a shared PostgreSQL) can tell it is stale. One store for both databases."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from memsvc.storage.dialect import syntax_of

_VERSION = "settings_version"
_READ = "SELECT key, value FROM settings WHERE substr(key, 1, ?) = ?"
_WRITE = (
    "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, {now}) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
)
_BUMP = "INSERT INTO sequences (name, value) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET value = sequences.value + 1"
_READ_VERSION = "SELECT value FROM sequences WHERE name = ?"


class SqlSettingsStore:
    """`db`: a `Database` or a `PgDatabase`."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.syntax = syntax_of(db)

    def read_settings(self, namespace: str) -> dict[str, Any]:
        """Every stored value of the namespace; unparsable JSON (only SQLite's text column can
        hold it) is skipped, so normalization falls back to the default rather than failing
        every request."""
        prefix = namespace + "."
        out: dict[str, Any] = {}
        with self.db.read() as conn:
            rows = conn.execute(self.syntax.sql(_READ), (len(prefix), prefix)).fetchall()
        for key, value in rows:
            try:
                out[key[len(prefix) :]] = self.syntax.read_json(value)
            except (TypeError, ValueError):
                continue
        return out

    def write_settings(self, namespace: str, values: Mapping[str, Any]) -> None:
        """All values and the version bump in one transaction."""
        now = self.syntax.now_params()
        with self.db.write() as conn:
            for name, value in values.items():
                text = json.dumps(value, ensure_ascii=False)
                conn.execute(self.syntax.sql(_WRITE), (f"{namespace}.{name}", text, *now))
            conn.execute(self.syntax.sql(_BUMP), (_VERSION,))

    def settings_version(self) -> int:
        with self.db.read() as conn:
            row = conn.execute(self.syntax.sql(_READ_VERSION), (_VERSION,)).fetchone()
        return int(row[0]) if row else 0


#: The names the callers and the contract suite construct.
SqliteSettingsStore = SqlSettingsStore
