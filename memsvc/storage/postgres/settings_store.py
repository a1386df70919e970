"""PostgreSQL's settings store is the shared one (`memsvc.storage.settings_store`)."""

from memsvc.storage.settings_store import SqlSettingsStore as PgSettingsStore

__all__ = ["PgSettingsStore"]
