"""A row cache that follows the database's change counter: a commit made through another
connection (as another server process makes them) empties it before the next lookup."""

from __future__ import annotations

from memsvc.kernel.cache import TtlCache
from memsvc.storage.database import Database


def _database(tmp_path) -> Database:
    database = Database(tmp_path / "rows.db")
    with database.write() as conn:
        conn.execute("CREATE TABLE rows (id TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO rows VALUES ('a', 'old')")
    return database


def _load(database: Database):
    def load() -> str:
        with database.read() as conn:
            return conn.execute("SELECT value FROM rows WHERE id = 'a'").fetchall()[0][0]

    return load


def test_a_commit_through_another_connection_is_seen_at_the_next_lookup(tmp_path):
    reader, other = _database(tmp_path), Database(tmp_path / "rows.db")  # two processes' views of one file
    try:
        cache: TtlCache[str] = TtlCache(max_entries=10, ttl_s=60.0, version=reader.data_version)
        assert cache.get_or_load("a", _load(reader)) == "old"
        assert cache.get_or_load("a", lambda: "never loaded") == "old"  # cached while nothing changed
        with other.write() as conn:
            conn.execute("UPDATE rows SET value = 'new' WHERE id = 'a'")
        assert cache.get_or_load("a", _load(reader)) == "new"
    finally:
        reader.close()
        other.close()


def test_a_value_loaded_before_a_change_is_not_kept_after_it(tmp_path):
    reader, other = _database(tmp_path), Database(tmp_path / "rows.db")
    try:
        cache: TtlCache[str] = TtlCache(max_entries=10, ttl_s=60.0, version=reader.data_version)

        def load_then_change() -> str:
            value = _load(reader)()
            with other.write() as conn:  # commits while the old value is on its way into the cache
                conn.execute("UPDATE rows SET value = 'new' WHERE id = 'a'")
            return value

        assert cache.get_or_load("a", load_then_change) == "old"
        assert cache.get_or_load("a", _load(reader)) == "new"
    finally:
        reader.close()
        other.close()


def test_without_a_version_only_local_invalidation_empties_the_cache(tmp_path):
    cache: TtlCache[str] = TtlCache(max_entries=10, ttl_s=60.0)
    assert cache.get_or_load("a", lambda: "old") == "old"
    assert cache.get_or_load("a", lambda: "new") == "old"
    cache.invalidate("a")
    assert cache.get_or_load("a", lambda: "new") == "new"
