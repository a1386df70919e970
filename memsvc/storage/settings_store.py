"""The `settings` table as a key → JSON value store, namespaced (`memory.maxTokens`), with a
version counter that every write bumps so caches in any process can tell they are stale."""

from __future__ import annotations

import json
from typing import Any, Mapping

from memsvc.kernel.models import utcnow
from memsvc.storage.database import Database, iso

_VERSION = "settings_version"


class SqliteSettingsStore:
    def __init__(self, db: Database):
        self.db = db

    def read_settings(self, namespace: str) -> dict[str, Any]:
        """Every stored value of the namespace; unparsable JSON is skipped (normalization
        then falls back to the default) rather than failing every request."""
        prefix = namespace + "."
        out: dict[str, Any] = {}
        with self.db.read() as conn:
            rows = conn.execute("SELECT key, value FROM settings WHERE substr(key, 1, ?) = ?",
                                (len(prefix), prefix)).fetchall()
        for key, value in rows:
            try:
                out[key[len(prefix):]] = json.loads(value)
            except (TypeError, ValueError):
                continue
        return out

    def write_settings(self, namespace: str, values: Mapping[str, Any]) -> None:
        """All values and the version bump in one transaction."""
        now = iso(utcnow())
        with self.db.write() as conn:
            for name, value in values.items():
                conn.execute(
                    "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    (f"{namespace}.{name}", json.dumps(value, ensure_ascii=False), now),
                )
            conn.execute("INSERT INTO sequences (name, value) VALUES (?, 1) "
                         "ON CONFLICT(name) DO UPDATE SET value = value + 1", (_VERSION,))

    def settings_version(self) -> int:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM sequences WHERE name = ?", (_VERSION,)).fetchone()
        return int(row[0]) if row else 0
