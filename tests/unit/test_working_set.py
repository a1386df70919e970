"""The working sets (memsvc.working_set) answer an owner's keyword search as the store's
FTS5 search does: on a database of one owner whose matches fit one window (where the two
definitions coincide) the same ids with the same scores, for random corpora, queries and
scopes, before and after inserts, updates, deletes, backdating and expiry applied through
the change sequence; and they stay correct across connections, owners and budgets."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsvc.kernel.models import MemoryPatch, NewMemory, SearchScope, utcnow
from memsvc.kernel.time_phrases import TimeWindow
from memsvc.storage import keyword
from memsvc.storage.database import Database, iso
from memsvc.storage.memory_rows import M_COLUMNS, row_to_memory
from memsvc.storage.sqlite_backend import SqliteMemoryBackend
from memsvc.storage.working_set_port import SqliteWorkingSetPort
from tests.support import owner_fts_oracle

WORDS = [
    "run",
    "running",
    "runs",
    "coffee",
    "tea",
    "dark",
    "mode",
    "editor",
    "kevin",
    "paris",
    "e-mail",
    "café",
    "naïve",
    "cook",
    "cooking",
    "week",
    "dog",
    "東京タワー",
    "绿茶",
    "喝绿茶和咖啡",
    "редактор",
    "любимый",
    "user",
    "prefers",
    "likes",
]
OWNER = "owner-1"


@pytest.fixture
def backend(tmp_path: Path):
    db = Database(tmp_path / "memsvc.db")
    b = SqliteMemoryBackend(db)
    b.initialize()
    yield b
    db.close()


def _reference(backend: SqliteMemoryBackend, scope: SearchScope, query: str, limit: int) -> dict[str, float]:
    """FTS5's ranking of the owner's rows (tests/support/owner_fts_oracle.py)."""
    with backend.db.read() as conn:
        hits = owner_fts_oracle.search(conn, M_COLUMNS, scope, query, row_to_memory)
    return {h.memory.id: h.score for h in hits[:limit]}


def _from_memory(backend: SqliteMemoryBackend, scope: SearchScope, query: str, limit: int) -> dict[str, float]:
    with backend.db.read() as conn:
        hits = backend.working_sets.search_keyword(conn, scope, query, limit)
    assert hits is not None, "the working set did not answer"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    return {h.memory.id: h.score for h in hits}


def _same(a: dict[str, float], b: dict[str, float]) -> None:
    assert a.keys() == b.keys()
    for memory_id, score in a.items():
        assert b[memory_id] == pytest.approx(score, rel=1e-9, abs=1e-12)


texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
queries = st.lists(st.sampled_from(WORDS + ["nothing"]), min_size=1, max_size=4).map(" ".join)


def _scopes(now):
    return [
        SearchScope(api_key_id=OWNER, now=now),
        SearchScope(api_key_id=OWNER, now=now, session_only=True, session_id="s1"),
        SearchScope(api_key_id=OWNER, now=now, session_only=True, session_id=None),
        SearchScope(api_key_id=OWNER, now=now, created_after=now - timedelta(days=30)),
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(
        st.tuples(texts, st.sampled_from([None, "s1", "s2"]), st.booleans(), st.integers(0, 3)), min_size=1, max_size=30
    ),
    keys=st.lists(st.sampled_from([None, "preference:tea", "name:user", "e-mail:work"]), min_size=30, max_size=30),
    query_list=st.lists(queries, min_size=1, max_size=4),
    edits=st.lists(
        st.tuples(st.integers(0, 29), st.sampled_from(["update", "delete", "backdate", "expire", "touch"]), texts),
        max_size=6,
    ),
)
def test_an_owners_search_from_memory_equals_the_stores(tmp_path_factory, docs, keys, query_list, edits):
    db = Database(tmp_path_factory.mktemp("ws") / "memsvc.db")
    backend = SqliteMemoryBackend(db)
    backend.initialize()
    with db.write() as conn:
        owner_fts_oracle.install(conn)
    try:
        now = utcnow()
        ids = []
        for i, (text, session, keep, _) in enumerate(docs):
            ids.append(
                backend.create(
                    NewMemory(
                        api_key_id=OWNER,
                        content=text,
                        session_id=session,
                        keep=keep,
                        key=keys[i] if keys[i] and i % 3 == 0 else None,
                    )
                ).memory.id
            )
        with db.write() as conn:  # some rows older than retention
            for (_, _, _, age), memory_id in zip(docs, ids):
                conn.execute(
                    "UPDATE memories SET created_at = ? WHERE id = ?", (iso(now - timedelta(days=20 * age)), memory_id)
                )
        for query in query_list:
            for scope in _scopes(now):
                _same(_reference(backend, scope, query, 100), _from_memory(backend, scope, query, 100))
        for index, action, text in edits:  # applied to the built working sets through the change log
            memory_id = ids[index % len(ids)]
            if action == "update":
                backend.update(memory_id, MemoryPatch(content=text))
            elif action == "delete":
                backend.delete(memory_id)
            elif action == "touch":
                backend.touch([memory_id])
            else:
                column, value = (
                    ("created_at", iso(now - timedelta(days=90)))
                    if action == "backdate"
                    else ("expires_at", iso(now - timedelta(seconds=1)))
                )
                with db.write() as conn:
                    conn.execute(f"UPDATE memories SET {column} = ? WHERE id = ?", (value, memory_id))
        for query in query_list:
            for scope in _scopes(utcnow()):
                _same(_reference(backend, scope, query, 100), _from_memory(backend, scope, query, 100))
    finally:
        db.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(
        st.tuples(
            st.sampled_from([None, "s1", "s2"]),
            st.sampled_from(["episodic", "factual"]),
            st.integers(0, 5),
            st.booleans(),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=25,
    ),
    edits=st.lists(st.tuples(st.integers(0, 24), st.sampled_from(["delete", "expire", "move"])), max_size=5),
    limit=st.integers(0, 30),
)
def test_an_owners_timeline_reads_from_memory_equal_the_stores(tmp_path_factory, docs, edits, limit):
    """recent, count_aged, happened_within, neighbours and the rows of given ids (a vector
    search's hits): what the store's SQL answers."""
    db = Database(tmp_path_factory.mktemp("ws") / "memsvc.db")
    backend = SqliteMemoryBackend(db)
    backend.initialize()
    store = SqliteMemoryBackend(db, working_set_bytes=0)
    try:
        now = utcnow()
        base = now - timedelta(days=10)
        made = []
        for session, type_, hour, keep, age in docs:  # several turns of one instant: ties by memory_id
            made.append(
                backend.create(
                    NewMemory(
                        api_key_id=OWNER,
                        content=f"turn at {hour}",
                        session_id=session,
                        type=type_,
                        keep=keep,
                        occurred_at=base + timedelta(hours=hour),
                    )
                ).memory
            )
            if age:
                with db.write() as conn:
                    conn.execute(
                        "UPDATE memories SET created_at = ? WHERE id = ?",
                        (iso(now - timedelta(days=20 * age)), made[-1].id),
                    )
        backend.recent(SearchScope(api_key_id=OWNER, now=now), 1)  # build, then edit through the log
        for index, action in edits:
            target = made[index % len(made)]
            if action == "delete":
                backend.delete(target.id)
            else:
                column, value = (
                    ("expires_at", iso(now - timedelta(seconds=1)))
                    if action == "expire"
                    else ("occurred_at", iso(base + timedelta(hours=2, seconds=index)))
                )
                with db.write() as conn:
                    conn.execute(f"UPDATE memories SET {column} = ? WHERE id = ?", (value, target.id))
        windows = [
            TimeWindow(base + timedelta(hours=1), base + timedelta(hours=3)),
            TimeWindow(base, base + timedelta(hours=2)),
        ]
        current = [m for m in (store.get(m.id) for m in made) if m is not None]
        for scope in _scopes(utcnow()):
            assert [m.id for m in backend.recent(scope, limit)] == [m.id for m in store.recent(scope, limit)]
            assert backend.count_aged(scope) == store.count_aged(scope)
            assert [m.id for m in backend.happened_within(scope, windows, limit)] == [
                m.id for m in store.happened_within(scope, windows, limit)
            ]
            near = {k: [m.id for m in v] for k, v in backend.neighbours(scope, current).items() if v}
            assert near == {k: [m.id for m in v] for k, v in store.neighbours(scope, current).items() if v}
            ids = [m.memory_id for m in made] + [10**9]  # a vector search's hits, deleted ones included
            with db.read() as conn:
                held = backend.working_sets.memories_in_scope(conn, scope, ids)
                rows = keyword.rows_in_scope(conn, M_COLUMNS, ids, scope)
            assert held is not None
            assert {m.id: m for m in held} == {m.id: m for m in map(row_to_memory, rows)}
        assert store.working_sets.status()["owners"] == 0 and backend.working_sets.status()["owners"] == 1
    finally:
        db.close()


def test_a_write_through_another_connection_is_seen_by_the_next_search(tmp_path: Path):
    first, second = Database(tmp_path / "memsvc.db"), None
    writer = SqliteMemoryBackend(first)
    writer.initialize()
    try:
        second = Database(tmp_path / "memsvc.db")
        reader = SqliteMemoryBackend(second)
        scope = SearchScope(api_key_id=OWNER, now=utcnow())
        kept = writer.create(NewMemory(api_key_id=OWNER, content="User drinks green tea")).memory
        assert [h.memory.id for h in reader.search_keyword(scope, "green tea", 10)] == [kept.id]
        added = writer.create(NewMemory(api_key_id=OWNER, content="Kevin drinks black tea")).memory
        writer.update(kept.id, MemoryPatch(content="User drinks coffee now"))
        found = [h.memory for h in reader.search_keyword(scope, "tea", 10)]
        assert [m.id for m in found] == [added.id]
        assert (
            reader.search_keyword(SearchScope(api_key_id=OWNER, now=utcnow()), "coffee", 10)[0].memory.content
            == "User drinks coffee now"
        )
        writer.delete(added.id)
        assert reader.search_keyword(scope, "tea", 10) == []
        assert reader.working_sets.stats.builds == 1 and reader.working_sets.stats.updates >= 2
    finally:
        first.close()
        if second is not None:
            second.close()


def test_a_request_whose_snapshot_is_older_than_the_set_is_answered_from_the_set(tmp_path: Path):
    """A request that began before a write another request of this process applied overlaps
    that write: the set (newer) answers it, instead of the store ranking it another way."""
    db = Database(tmp_path / "memsvc.db")
    backend = SqliteMemoryBackend(db)
    backend.initialize()
    try:
        backend.create(NewMemory(api_key_id=OWNER, content="The boat is moored at pier 4"))
        scope = SearchScope(api_key_id=OWNER, now=utcnow())
        started = threading.Event()
        written = threading.Event()
        seen: list[list[str]] = []

        def old_request() -> None:
            with db.read() as conn:  # its snapshot is taken here, before the write below
                conn.execute("SELECT count(*) FROM memories").fetchall()
                started.set()
                written.wait(30)
                seen.append([h.memory.content for h in backend.working_sets.search_keyword(conn, scope, "pier", 10)])

        reader = threading.Thread(target=old_request)
        reader.start()
        started.wait(30)
        backend.create(NewMemory(api_key_id=OWNER, content="The car is parked at pier 9"))
        assert len(backend.search_keyword(scope, "pier", 10)) == 2  # this thread applied the write
        written.set()
        reader.join(30)
        assert sorted(seen[0]) == ["The boat is moored at pier 4", "The car is parked at pier 9"]
        assert backend.working_sets.stats.store_searches == 0
    finally:
        db.close()


def test_owners_never_share_a_working_set(backend):
    for owner in ("tenant-a", "tenant-b"):
        backend.create(NewMemory(api_key_id=owner, content=f"{owner} keeps the cellar key under the mat"))
    for owner in ("tenant-a", "tenant-b"):
        hits = backend.search_keyword(SearchScope(api_key_id=owner, now=utcnow()), "cellar key", 10)
        assert [h.memory.api_key_id for h in hits] == [owner]
    assert backend.working_sets.status()["owners"] == 2


def test_a_budget_too_small_for_an_owner_leaves_the_search_to_the_store(tmp_path: Path):
    db = Database(tmp_path / "memsvc.db")
    tiny = SqliteMemoryBackend(db, working_set_bytes=1)
    tiny.initialize()
    try:
        made = [
            tiny.create(NewMemory(api_key_id=OWNER, content=f"note {i} about the garden")).memory.id for i in range(5)
        ]
        scope = SearchScope(api_key_id=OWNER, now=utcnow())
        with db.read() as conn:
            assert tiny.working_sets.search_keyword(conn, scope, "garden", 10) is None
        assert {h.memory.id for h in tiny.search_keyword(scope, "garden", 10)} == set(made)
        assert tiny.working_sets.status()["owners"] == 0
    finally:
        db.close()


def test_eviction_keeps_the_budget_and_evicted_owners_still_answer(tmp_path: Path):
    db = Database(tmp_path / "memsvc.db")
    probe = SqliteMemoryBackend(db)
    probe.initialize()
    try:
        for owner in ("a", "b", "c"):
            for i in range(20):
                probe.create(NewMemory(api_key_id=owner, content=f"{owner} remembers item {i} of the list"))
        probe.search_keyword(SearchScope(api_key_id="a", now=utcnow()), "list", 50)
        one_owner = probe.working_sets.status()["bytes"]
        small = SqliteMemoryBackend(db, working_set_bytes=int(one_owner * 1.5))
        for _ in range(2):
            for owner in ("a", "b", "c"):
                hits = small.search_keyword(SearchScope(api_key_id=owner, now=utcnow()), "list", 50)
                assert len(hits) == 20 and {h.memory.api_key_id for h in hits} == {owner}
                status = small.working_sets.status()
                assert status["bytes"] <= status["budget_bytes"] and status["owners"] == 1
        assert small.working_sets.stats.evictions >= 5
    finally:
        db.close()


def test_a_log_that_no_longer_reaches_the_version_rebuilds(backend, monkeypatch):
    from memsvc.storage import working_set_port

    first = backend.create(NewMemory(api_key_id=OWNER, content="the blue bicycle")).memory
    scope = SearchScope(api_key_id=OWNER, now=utcnow())
    assert [h.memory.id for h in backend.search_keyword(scope, "bicycle", 10)] == [first.id]
    monkeypatch.setattr(working_set_port, "CHANGE_LOG_ROWS", 0)
    second = backend.create(NewMemory(api_key_id=OWNER, content="the red bicycle")).memory
    backend.create(NewMemory(api_key_id=OWNER, content="an unrelated row"))
    assert {h.memory.id for h in backend.search_keyword(scope, "bicycle", 10)} == {first.id, second.id}
    assert backend.working_sets.stats.builds == 2


def test_recorded_accesses_update_the_held_rows_in_place(backend):
    """A Retrieve's access counters come back through the change log every second: the set
    takes them as column writes, so answers carry the new counts while the set's size (and
    its postings) stay as they were, however many times the same rows are touched."""
    made = [backend.create(NewMemory(api_key_id=OWNER, content=f"green tea number {i}")).memory for i in range(5)]
    scope = SearchScope(api_key_id=OWNER, now=utcnow())
    _from_memory(backend, scope, "tea", 10)
    size = backend.working_sets.status()["bytes"]
    for _ in range(50):
        backend.touch([m.id for m in made[:3]])
        with backend.db.read() as conn:
            hits = backend.working_sets.search_keyword(conn, SearchScope(api_key_id=OWNER, now=utcnow()), "tea", 10)
    assert hits is not None
    assert {h.memory.id: h.memory.access_count for h in hits} == {
        m.id: (50 if i < 3 else 0) for i, m in enumerate(made)
    }
    assert all(h.memory.last_accessed_at is not None for h in hits if h.memory.access_count)
    assert backend.working_sets.status()["bytes"] == size
    assert backend.working_sets.status()["builds"] == 1


def test_marking_memories_for_reindex_alone_logs_no_change(backend):
    """A forced reindex marks every row; no working set reads the mark, so the log stays put
    (a million rows would otherwise be a million log entries in one transaction)."""
    made = backend.create(NewMemory(api_key_id=OWNER, content="the spare tyre is in the boot")).memory
    scope = SearchScope(api_key_id=OWNER, now=utcnow())
    with backend.db.read() as conn:
        before = SqliteWorkingSetPort().owner_version(conn, OWNER)
    assert backend.mark_all_for_reindex() == 1
    with backend.db.read() as conn:
        assert SqliteWorkingSetPort().owner_version(conn, OWNER) == before
    backend.touch([made.id])  # any other column still counts
    with backend.db.read() as conn:
        assert SqliteWorkingSetPort().owner_version(conn, OWNER) > before
    assert [h.memory.access_count for h in backend.search_keyword(scope, "spare tyre", 10)] == [1]


def test_searches_racing_a_stream_of_writes_miss_none_of_them(tmp_path: Path):
    """Builds and updates that race writes through another connection: a search answers from
    a set no older than its snapshot (so it holds every row the snapshot holds that is never
    deleted, and none deleted before the snapshot began), and once the writes stop the set
    holds exactly the store's rows."""
    db = Database(tmp_path / "memsvc.db")
    backend = SqliteMemoryBackend(db)
    backend.initialize()
    writer = SqliteMemoryBackend(Database(tmp_path / "memsvc.db"), working_set_bytes=0)
    stop = threading.Event()
    doomed: set[str] = set()  # marked before their deletes begin
    deleted: list[str] = []  # added once their deletes committed
    problems: list[str] = []

    def write() -> None:
        for i in range(300):
            made = writer.create(NewMemory(api_key_id=OWNER, content=f"harbour note {i}")).memory
            if i % 7 == 0:
                writer.update(made.id, MemoryPatch(content=f"harbour note {i} revised"))
            if i % 11 == 0:
                doomed.add(made.id)
                writer.delete(made.id)
                deleted.append(made.id)
        stop.set()

    def search() -> None:
        while not stop.is_set():
            gone_before = set(deleted)  # committed before the snapshot below begins
            with db.read() as conn:
                seen = {r[0] for r in conn.execute("SELECT id FROM memories WHERE api_key_id = ?", (OWNER,))}
                hits = backend.working_sets.search_keyword(
                    conn, SearchScope(api_key_id=OWNER, now=utcnow()), "harbour", 1000
                )
            found = {h.memory.id for h in hits or ()}
            kept = seen - doomed  # the snapshot's rows that no write ever deletes
            if hits is None or not kept <= found or found & gone_before:
                problems.append(f"{len(kept - found)} kept rows missing, {len(found & gone_before)} deleted ones found")

    threads = [threading.Thread(target=write)] + [threading.Thread(target=search) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert problems == []
        scope = SearchScope(api_key_id=OWNER, now=utcnow())
        assert {h.memory.id: h.memory.content for h in backend.search_keyword(scope, "harbour", 1000)} == {
            h.memory.id: h.memory.content for h in writer.search_keyword(scope, "harbour", 1000)
        }
    finally:
        stop.set()
        writer.db.close()
        db.close()
