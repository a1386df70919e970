"""The keyword index knows each row's owner (migration 0004): a search matches only the
owner's rows inside FTS5 itself, for any owner id (punctuation, spaces, any script), and the
index stays consistent with its content through inserts, updates and deletes."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsvc.core.models import NewMemory, SearchScope, utcnow
from memsvc.storage.database import Database
from memsvc.storage.keyword import owner_token
from memsvc.storage.sqlite_backend import SqliteMemoryBackend

OWNERS = ["key-a", "key a", "ключ", "鍵", "a" * 256, "A", "a", "x'y\"z", "ed", "oe"]


@pytest.fixture
def backend(tmp_path: Path):
    db = Database(tmp_path / "memsvc.db")
    b = SqliteMemoryBackend(db)
    b.initialize()
    yield b
    db.close()


def test_each_owner_finds_only_its_own_rows(backend):
    ids = {o: backend.create(NewMemory(api_key_id=o, content=f"I prefer dark mode {i}")).id for i, o in enumerate(OWNERS)}
    now = utcnow()
    for owner in OWNERS:
        hits = backend.search_keyword(SearchScope(owner, now), "dark mode", 50)
        assert [h.memory.id for h in hits] == [ids[owner]]
    assert len(backend.search_keyword(SearchScope(None, now), "dark mode", 50)) == len(OWNERS)


def test_sql_and_python_agree_on_the_owner_token(backend):
    for owner in OWNERS:
        with backend.db.read() as conn:
            assert conn.execute("SELECT 'o' || hex(?) || '0'", (owner,)).fetchone()[0] == owner_token(owner)
    assert len({owner_token(o) for o in OWNERS}) == len(OWNERS)


def test_index_stays_consistent_through_updates_and_deletes(backend):
    from memsvc.core.models import MemoryPatch

    made = [backend.create(NewMemory(api_key_id=o, key="k", content="green tea in the morning")) for o in OWNERS]
    backend.update(made[0].id, MemoryPatch(content="black coffee at night"))
    backend.touch([m.id for m in made])
    backend.delete(made[1].id)
    now = utcnow()
    assert backend.search_keyword(SearchScope(OWNERS[0], now), "coffee", 5)[0].memory.id == made[0].id
    assert backend.search_keyword(SearchScope(OWNERS[0], now), "tea", 5) == []
    assert backend.search_keyword(SearchScope(OWNERS[1], now), "tea", 5) == []
    with backend.db.write() as conn:
        conn.execute("INSERT INTO memory_fts(memory_fts) VALUES('integrity-check')")
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES('integrity-check', 1)")
