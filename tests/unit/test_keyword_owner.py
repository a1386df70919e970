"""An owner's keyword search, answered from its working set or (budget 0) by the store's
shared indexes: it finds the owner's rows only, for any owner id (punctuation, spaces, any
script), matches exactly what the shared porter/unicode61 and trigram indexes match for that
owner, and stays consistent through inserts, updates, deletes and the migrations of a
database that already holds rows. A row has one keyword index (migration 0012 dropped the
per-owner one), and writing it calls no Python function."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from memsvc.kernel.models import MemoryPatch, NewMemory, SearchScope, utcnow
from memsvc.storage import migrations
from memsvc.storage.database import Database, iso
from memsvc.storage.sqlite_backend import SqliteMemoryBackend

OWNERS = ["key-a", "key a", "ключ", "鍵", "a" * 256, "A", "a", "x'y\"z", "ed", "oe"]

DOCS = [
    "I prefer dark mode in every editor",
    "Running every morning before work",
    "My e-mail is on the Café Naïve website",
    "C++ and Rust are my languages",
    "東京タワーの近くに住んでいます",
    "先輩の佐々木さんは時々厳しい",
    "我喜欢喝绿茶和咖啡",
    "Мой любимый редактор — Vim",
    'Johnson & Johnson parens(test) asterisk* "quoted"',
]
QUERIES = [
    "dark mode",
    "runs",
    "email",
    "e-mail",
    "cafe",
    "naive",
    "c++",
    "rust language",
    "東京タワー",
    "佐々木",
    "時々厳",
    "绿茶",
    "喝绿茶和",
    "редактор",
    "johnson",
    "parens(test)",
    "asterisk*",
    '"quoted',
    "nothing here",
]


@pytest.fixture(params=["working-set", "store"])
def backend(request, tmp_path: Path):
    """Both ways an owner's search is answered: its working set, and the store's shared
    indexes (what answers an owner the working-set budget cannot hold)."""
    db = Database(tmp_path / "memsvc.db")
    b = SqliteMemoryBackend(db) if request.param == "working-set" else SqliteMemoryBackend(db, working_set_bytes=0)
    b.initialize()
    yield b
    db.close()


@pytest.fixture
def held(tmp_path: Path):
    """A backend whose owners' searches come from their working sets."""
    db = Database(tmp_path / "memsvc.db")
    b = SqliteMemoryBackend(db)
    b.initialize()
    yield b
    db.close()


def _shared_matches(backend, owner: str, query: str) -> set[int]:
    """What the shared indexes (porter/unicode61 words, trigram CJK) match for the owner."""
    from memsvc.kernel.text import terms
    from memsvc.storage.keyword import cjk_query, word_query

    t = terms(query)
    found: set[int] = set()
    with backend.db.read() as conn:
        for table, q in (("memory_fts", word_query(t)), ("memory_fts_cjk", cjk_query(t))):
            if q is None:
                continue
            match = f"{{content key}} : ({q})" if table == "memory_fts" else q
            found |= {
                r[0]
                for r in conn.execute(
                    f"SELECT f.rowid FROM {table} f JOIN memories m ON m.memory_id = f.rowid "
                    f"WHERE {table} MATCH ? AND m.api_key_id = ?",
                    (match, owner),
                )
            }
    return found


def test_each_owner_finds_only_its_own_rows(backend):
    ids = {
        o: backend.create(NewMemory(api_key_id=o, content=f"I prefer dark mode {i} 東京タワー")).id
        for i, o in enumerate(OWNERS)
    }
    now = utcnow()
    for owner in OWNERS:
        for query in ("dark mode", "東京タワー"):
            hits = backend.search_keyword(SearchScope(owner, now), query, 50)
            assert [h.memory.id for h in hits] == [ids[owner]]
    assert len(backend.search_keyword(SearchScope(None, now), "dark mode", 50)) == len(OWNERS)


def test_a_write_calls_no_python_function_and_feeds_one_word_index(backend):
    """A plain SQLite connection, with none of memsvc's SQL functions registered, can write
    memories: no trigger tokenizes in Python any more (0005's did, for every row)."""
    with backend.db.read() as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'memory%fts%'")}
    assert "memory_owner_fts" not in names and "memory_fts" in names
    plain = apsw.Connection(str(backend.db.path))
    try:
        plain.execute(
            "INSERT INTO memories (id, memory_id, api_key_id, type, content, created_at, updated_at) "
            "VALUES ('plain-1', 900001, 'key-plain', 'factual', 'I prefer dark mode', ?, ?)",
            (iso(utcnow()), iso(utcnow())),
        )
    finally:
        plain.close()
    hits = backend.search_keyword(SearchScope("key-plain", utcnow()), "dark mode", 5)
    assert [h.memory.id for h in hits] == ["plain-1"]


def test_owner_search_matches_what_the_shared_index_matches(backend):
    made: dict[str, dict[str, str]] = {}
    for owner in OWNERS[:4]:
        made[owner] = {backend.create(NewMemory(api_key_id=owner, content=doc)).id: doc for doc in DOCS}
    now = utcnow()
    for owner in OWNERS[:4]:
        for query in QUERIES:
            ours = {h.memory.memory_id for h in backend.search_keyword(SearchScope(owner, now), query, 100)}
            assert ours == _shared_matches(backend, owner, query), (owner, query)
    # The cases the parity above must cover really match something (stemming, folding, CJK).
    owner = OWNERS[0]
    for query, doc in (
        ("runs", DOCS[1]),
        ("cafe", DOCS[2]),
        ("e-mail", DOCS[2]),
        ("東京タワー", DOCS[4]),
        ("佐々木", DOCS[5]),
        ("時々厳", DOCS[5]),
        ("喝绿茶和", DOCS[6]),
        ("редактор", DOCS[7]),
    ):
        hits = backend.search_keyword(SearchScope(owner, now), query, 5)
        assert [made[owner][h.memory.id] for h in hits] == [doc], query


def test_index_stays_consistent_through_updates_and_deletes(backend):
    made = [backend.create(NewMemory(api_key_id=o, key="k", content="green tea in the morning")) for o in OWNERS]
    backend.update(made[0].id, MemoryPatch(content="black coffee at night 東京タワー"))
    backend.touch([m.id for m in made])
    backend.delete(made[1].id)
    now = utcnow()
    assert backend.search_keyword(SearchScope(OWNERS[0], now), "coffee", 5)[0].memory.id == made[0].id
    assert backend.search_keyword(SearchScope(OWNERS[0], now), "東京タワー", 5)[0].memory.id == made[0].id
    assert backend.search_keyword(SearchScope(OWNERS[0], now), "tea", 5) == []
    assert backend.search_keyword(SearchScope(OWNERS[1], now), "tea", 5) == []
    assert [h.memory.id for h in backend.search_keyword(SearchScope(OWNERS[2], now), "tea", 5)] == [made[2].id]
    with backend.db.write() as conn:
        conn.execute("INSERT INTO memory_fts(memory_fts) VALUES('integrity-check')")
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES('integrity-check', 1)")
        rows = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    assert rows == len(OWNERS) - 1


def test_migration_indexes_rows_written_before_it(tmp_path):
    db = Database(tmp_path / "old.db")
    try:
        with db.write() as conn:
            conn.execute(migrations._CREATE_TABLE)
        for version, name, sql in migrations.available_migrations():
            if version < 5:
                migrations._apply_one(db, version, name, sql, 4)
        backend = SqliteMemoryBackend(db)
        old = [f"old-{i}" for i in range(3)]
        with db.write() as conn:  # rows as version 4 wrote them (later migrations add columns the backend writes)
            for i, (owner, memory_id) in enumerate(zip(OWNERS[:3], old), start=1):
                conn.execute(
                    "INSERT INTO memories (id, memory_id, api_key_id, type, content, created_at, updated_at) "
                    "VALUES (?, ?, ?, 'factual', 'I prefer dark mode', ?, ?)",
                    (memory_id, i, owner, iso(utcnow()), iso(utcnow())),
                )
        assert migrations.apply_migrations(db)[0] == 5
        now = utcnow()
        for searcher in (backend, SqliteMemoryBackend(db, working_set_bytes=0)):
            for owner, memory_id in zip(OWNERS[:3], old):
                assert [h.memory.id for h in searcher.search_keyword(SearchScope(owner, now), "dark", 5)] == [memory_id]
    finally:
        db.close()


def test_a_word_common_among_the_owners_memories_selects_no_candidates(backend):
    """ "prefer" is in 603 of the owner's 604 memories: searching "prefer haskell" ranks only
    what "haskell" selects (and still counts "prefer" in their relevance), instead of
    reading 603 rows for a word that says nothing. Alone, beside other common words, or
    beside words the owner never used, the common words still search. The working set
    counts the owner's memories, the store's search the whole index's (here nearly the
    same rows)."""
    from memsvc.working_set.owner import COMMON_MIN_DOCS

    owner, other = "key-common", "key-small"
    common = COMMON_MIN_DOCS + 100
    backend.create_many([NewMemory(api_key_id=owner, content=f"User prefers option {i}") for i in range(common)])
    haskell = {
        backend.create(NewMemory(api_key_id=owner, content=f"User prefers Haskell for tool {i}")).id for i in range(3)
    }
    tea = backend.create(NewMemory(api_key_id=owner, content="Green tea in the morning")).id
    for i in range(5):
        backend.create(NewMemory(api_key_id=other, content=f"User prefers plain text {i} and Haskell"))
    now = utcnow()

    def found(who: str, query: str) -> set[str]:
        return {h.memory.id for h in backend.search_keyword(SearchScope(who, now), query, 100)}

    assert found(owner, "prefer haskell") == haskell
    assert found(owner, "prefer tea") == {tea}
    # Alone, beside other common words, or beside words the owner never used, the common
    # words are all the query has: they search.
    assert len(found(owner, "prefer")) == 100
    assert len(found(owner, "prefer option")) == 100
    assert len(found(owner, "prefer zeppelin")) == 100
    # An owner with few memories keeps every word: nothing is common enough to cost anything.
    assert len(found(other, "prefer haskell")) == 5


def test_bm25_weighs_words_by_the_owners_own_document_frequencies(held):
    """bm25 over the owner index counts N (and so every word's idf) over every owner's rows:
    among 1,000 rows of another owner, "kate", in 9 of this owner's 10 memories, weighed
    almost as much as "pasta", in one, and the row saying "Kate" four times outranked the
    row about pasta. The owner's search scores its rows with the owner's own counts, as a
    per-owner index would: a word in most of the owner's memories weighs nothing."""
    backend = held
    owner = "key-chat"
    backend.create_many([NewMemory(api_key_id="key-other", content=f"Bob: note number {i}") for i in range(1000)])
    backend.create_many([NewMemory(api_key_id=owner, content=f"Kate: filler line {i}") for i in range(8)])
    chatty = backend.create(NewMemory(api_key_id=owner, content="Kate: Kate said Kate is Kate")).id
    pasta = backend.create(
        NewMemory(
            api_key_id=owner,
            content="Bob: I cooked pasta with tomatoes and garlic for the whole family at dinner tonight",
        )
    ).id
    hits = backend.search_keyword(SearchScope(owner, utcnow()), "What pasta did Kate like?", 10)
    assert [h.memory.id for h in hits[:2]] == [pasta, chatty]
    assert len(hits) == 10
    # The other owner's search is untouched by this owner's rows.
    assert len(backend.search_keyword(SearchScope("key-other", utcnow()), "note", 5)) == 5
