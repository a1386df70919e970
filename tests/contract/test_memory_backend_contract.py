"""The memory store's contract: what the engine relies on from the store of router memories.

The rule: every store memsvc can run on passes this file unchanged. Each store is one entry
of FACTORIES (a fresh, initialized store under the test's temporary folder, shut down after
the test); adding a store adds an entry and changes no test. Tests speak to the store only
through the methods the engine calls (create, list, search_keyword, neighbours, ...), never
through its query language. The one thing the engine never does but a test must, making a
memory old, is the factory's `backdate` helper, so each store provides its own.

Behaviour of one store alone (its tokenizers, its vector extension, its schema and file
handling) stays in that store's own tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memsvc.kernel.errors import ConflictError
from memsvc.kernel.models import (
    MEMORY_TYPES,
    Memory,
    MemoryFilter,
    MemoryPatch,
    NewMemory,
    SearchScope,
    UpsertResult,
    estimate_tokens,
    utcnow,
)
from memsvc.kernel.time_phrases import TimeWindow
from memsvc.storage.database import Database, iso
from memsvc.storage.sqlite_backend import SqliteMemoryBackend

# -- the stores ------------------------------------------------------------------------------


@dataclass
class Store:
    """One store under test: the backend, and how to make one of its memories old
    (`backdate(id, when)` sets its created_at, which no engine route changes)."""

    backend: Any
    backdate: Callable[[str, datetime], None]


def _sqlite(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    database = Database(tmp_path / "contract" / "memsvc.db")
    backend = SqliteMemoryBackend(database)
    backend.initialize()

    def backdate(memory_id: str, when: datetime) -> None:
        with database.write() as conn:
            conn.execute("UPDATE memories SET created_at = ? WHERE id = ?", (iso(when), memory_id))

    return Store(backend, backdate)


def _postgres(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    """A database of the test's own on the run's real PostgreSQL (the `postgres_db_url`
    fixture); imported here, so the SQLite entries need no PostgreSQL."""
    from memsvc.storage.postgres.database import PgDatabase
    from memsvc.storage.postgres.memory_backend import PgMemoryBackend

    database = PgDatabase(request.getfixturevalue("postgres_db_url"))
    backend = PgMemoryBackend(database)
    backend.initialize()

    def backdate(memory_id: str, when: datetime) -> None:
        with database.write() as conn:
            conn.execute("UPDATE memories SET created_at = %s WHERE id = %s", (when, memory_id))

    return Store(backend, backdate)


#: name -> factory(tmp_path, request) giving a fresh initialized store. A factory that needs
#: a server takes it from `request.getfixturevalue(...)`.
FACTORIES: dict[str, Callable[[Path, pytest.FixtureRequest], Store]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path):
    made = FACTORIES[request.param](tmp_path, request)
    try:
        yield made
    finally:
        made.backend.shutdown()


@pytest.fixture
def backend(store: Store):
    return store.backend


# -- helpers ---------------------------------------------------------------------------------

DAY = timedelta(days=1)
T0 = datetime(2024, 3, 5, 12, 0, 0, tzinfo=UTC)


def _new(content: str, owner: str = "alice", **kw: Any) -> NewMemory:
    return NewMemory(api_key_id=owner, content=content, **kw)


def _add(backend, content: str, owner: str = "alice", **kw: Any) -> Memory:
    result = backend.create(_new(content, owner, **kw))
    stored = backend.get(result.id)
    assert stored is not None
    return stored


def _scope(owner: str | None = "alice", **kw: Any) -> SearchScope:
    return SearchScope(api_key_id=owner, now=kw.pop("now", None) or utcnow(), **kw)


def _ids(memories) -> set[str]:
    return {m.id for m in memories}


def _hit_ids(hits) -> list[str]:
    return [h.memory.id for h in hits]


def _is_utc(moment: datetime | None) -> bool:
    return moment is not None and moment.utcoffset() == timedelta(0)


def _all(backend, flt: MemoryFilter | None = None) -> list[Memory]:
    return backend.list(flt or MemoryFilter(), 1000, 0).data


# -- create and get --------------------------------------------------------------------------


def test_create_then_get_returns_every_field_as_written(backend):
    occurred = datetime(2024, 3, 5, 14, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    expires = datetime(2031, 1, 2, 3, 4, 5, 654321, tzinfo=UTC)
    metadata = {
        "source": "chat",
        "nested": {"list": [1, "two", {"three": 3.5}], "none": None, "yes": True},
        "unicode": "Grüße 你好",
    }
    before = utcnow()
    result = backend.create(
        _new(
            "Alice prefers green tea",
            type="episodic",
            key="drink",
            metadata=metadata,
            session_id="s1",
            expires_at=expires,
            keep=True,
            occurred_at=occurred,
        )
    )
    after = utcnow()
    assert isinstance(result, UpsertResult) and result.created
    got = backend.get(result.id)
    assert got is not None and got == result.memory
    assert (got.id, got.api_key_id, got.content, got.type, got.key) == (
        result.id,
        "alice",
        "Alice prefers green tea",
        "episodic",
        "drink",
    )
    assert got.metadata == metadata and got.session_id == "s1" and got.keep is True
    assert got.expires_at == expires and got.occurred_at == occurred  # microseconds kept
    assert _is_utc(got.occurred_at) and _is_utc(got.expires_at)
    assert _is_utc(got.created_at) and _is_utc(got.updated_at)
    assert before <= got.created_at <= got.updated_at <= after
    assert got.access_count == 0 and got.last_accessed_at is None and got.needs_reindex is False


def test_a_plain_draft_gets_the_defaults(backend):
    got = _add(backend, "just a note")
    assert (got.type, got.key, got.session_id, got.metadata) == ("factual", None, None, {})
    assert got.expires_at is None and got.occurred_at is None and got.keep is False
    assert got.happened_at == got.created_at


def test_ids_and_memory_ids_are_unique(backend):
    results = backend.create_many([_new(f"note {i}") for i in range(20)])
    assert len({r.id for r in results}) == 20
    memory_ids = [r.memory.memory_id for r in results]
    assert len(set(memory_ids)) == 20 and memory_ids == sorted(memory_ids)


def test_get_of_an_unknown_id_is_none(backend):
    assert backend.get("00000000-0000-4000-8000-000000000000") is None


def test_get_many_returns_the_existing_ones_by_id(backend):
    a, b = _add(backend, "first"), _add(backend, "second")
    found = backend.get_many([a.id, "00000000-0000-4000-8000-000000000000", b.id])
    assert found == {a.id: a, b.id: b}
    assert backend.get_many([]) == {}


# -- upsert on (owner, key) ------------------------------------------------------------------


def test_a_keyed_create_updates_the_owners_row_in_place(backend):
    first = backend.create(
        _new(
            "Lives in Paris",
            key="city",
            type="factual",
            session_id="s1",
            metadata={"a": 1, "b": {"x": 1}},
            expires_at=T0 + 3650 * DAY,
        )
    )
    stored = backend.get(first.id)
    second = backend.create(
        _new("Lives in Lisbon", key="city", type="semantic", session_id="s2", metadata={"b": {"y": 2}, "c": 3})
    )
    assert second.id == first.id and second.created is False
    got = backend.get(first.id)
    assert got == second.memory
    assert (got.content, got.type, got.session_id, got.expires_at) == ("Lives in Lisbon", "semantic", "s2", None)
    assert got.metadata == {"a": 1, "b": {"y": 2}, "c": 3}  # merged shallowly, new keys winning
    assert got.created_at == stored.created_at and got.updated_at >= stored.updated_at
    assert got.memory_id == stored.memory_id
    assert backend.list(MemoryFilter(api_key_id="alice"), 10, 0).total == 1


def test_an_upsert_keeps_keep_and_occurred_at_unless_given(backend):
    said = datetime(2023, 7, 1, 9, 0, tzinfo=UTC)
    first = backend.create(_new("v1", key="k", keep=True, occurred_at=said))
    backend.create(_new("v2", key="k"))
    got = backend.get(first.id)
    assert got.content == "v2" and got.keep is True and got.occurred_at == said
    later = said + DAY
    backend.create(_new("v3", key="k", keep=False, occurred_at=later))
    got = backend.get(first.id)
    assert got.keep is False and got.occurred_at == later


def test_keyless_memories_never_upsert(backend):
    a, b = backend.create(_new("same words")), backend.create(_new("same words"))
    assert a.created and b.created and a.id != b.id
    assert backend.list(MemoryFilter(api_key_id="alice"), 10, 0).total == 2


def test_a_key_belongs_to_one_owner(backend):
    a = backend.create(_new("alice's city", owner="alice", key="city"))
    b = backend.create(_new("bob's city", owner="bob", key="city"))
    assert a.created and b.created and a.id != b.id
    assert backend.get(a.id).content == "alice's city" and backend.get(b.id).content == "bob's city"


def test_a_batch_repeating_a_key_upserts_its_own_earlier_draft(backend):
    first, second = backend.create_many([_new("one", key="k"), _new("two", key="k")])
    assert first.created and not second.created and second.id == first.id
    assert backend.get(first.id).content == "two"


# -- batches ---------------------------------------------------------------------------------


def _refused(content: str = "refused") -> NewMemory:
    """A draft every store must refuse: an unknown type (the store's own check is the last
    line of defence behind the engine's validation)."""
    return _new(content, type="no-such-type")


def test_create_many_stores_all_or_none(backend):
    kept = backend.create(_new("original", key="k"))
    with pytest.raises(Exception):
        backend.create_many([_new("good one"), _new("changed", key="k"), _refused(), _new("good two")])
    assert [m.content for m in _all(backend)] == ["original"]
    assert backend.get(kept.id).content == "original"


def test_create_many_runs_the_hook_inside_its_transaction(backend):
    seen: list[list[Memory | None]] = []
    results = backend.create_many([_new("a"), _new("b", key="k")], lambda handle, rows: seen.append(rows))
    assert [[m.id for m in rows] for rows in seen] == [[r.id for r in results]]
    assert [m.memory_id for m in seen[0]] == [backend.get(r.id).memory_id for r in results]

    def refuse(handle, rows):
        raise RuntimeError("the derived rows could not be written")

    with pytest.raises(RuntimeError):
        backend.create_many([_new("c"), _new("d")], refuse)
    assert sorted(m.content for m in _all(backend)) == ["a", "b"]  # the hook's failure undid the batch


def test_create_each_stores_every_draft_that_does_not_fail(backend):
    seen: list[list[Memory | None]] = []
    outcomes = backend.create_each(
        [_new("kept one"), _refused(), _new("kept two", key="k")], lambda handle, rows: seen.append(rows)
    )
    assert isinstance(outcomes[1], Exception)
    assert isinstance(outcomes[0], UpsertResult) and outcomes[0].created
    assert isinstance(outcomes[2], UpsertResult) and outcomes[2].created
    assert seen[0][1] is None and [m.content for m in (seen[0][0], seen[0][2])] == ["kept one", "kept two"]
    assert sorted(m.content for m in _all(backend)) == ["kept one", "kept two"]


# -- update, delete, clear -------------------------------------------------------------------


def test_update_changes_only_the_fields_the_patch_names(backend):
    said = datetime(2024, 1, 1, tzinfo=UTC)
    m = _add(
        backend, "old words", type="factual", key="k", metadata={"a": 1, "b": 2}, session_id="s1", occurred_at=said
    )
    untouched = backend.update(m.id, MemoryPatch(content="new words"))
    assert (untouched.content, untouched.type, untouched.key, untouched.metadata) == (
        "new words",
        "factual",
        "k",
        {"a": 1, "b": 2},
    )
    assert untouched.occurred_at == said and untouched.keep is False and untouched.session_id == "s1"
    assert untouched.created_at == m.created_at and untouched.updated_at >= m.updated_at
    later = said + DAY
    changed = backend.update(
        m.id, MemoryPatch(type="semantic", key="k2", metadata={"c": 3}, keep=True, occurred_at=later)
    )
    assert (changed.type, changed.key, changed.metadata, changed.keep, changed.occurred_at) == (
        "semantic",
        "k2",
        {"c": 3},
        True,
        later,
    )  # metadata replaced whole
    assert backend.get(m.id) == changed
    assert backend.update(m.id, MemoryPatch(keep=False)).keep is False


def test_update_of_an_unknown_id_is_none(backend):
    assert backend.update("00000000-0000-4000-8000-000000000000", MemoryPatch(content="x")) is None


def test_update_to_a_key_the_owner_already_uses_is_a_conflict(backend):
    taken = _add(backend, "one", key="taken")
    other = _add(backend, "two", key="free")
    with pytest.raises(ConflictError) as caught:
        backend.update(other.id, MemoryPatch(key="taken", content="changed"))
    assert caught.value.reason == "DUPLICATE_KEY"
    assert backend.get(other.id) == other and backend.get(taken.id) == taken
    assert backend.update(other.id, MemoryPatch(key="free")).key == "free"  # its own key is fine
    assert _add(backend, "bob", owner="bob", key="x").key == "x"
    assert backend.update(other.id, MemoryPatch(key="x")).key == "x"  # bob's key is not alice's


def test_delete_says_whether_it_deleted(backend):
    m = _add(backend, "doomed")
    assert backend.delete(m.id) is True
    assert backend.get(m.id) is None
    assert backend.delete(m.id) is False


def test_memory_id_is_never_reused_after_the_newest_row_is_deleted(backend):
    _add(backend, "first")
    newest = _add(backend, "newest")
    assert backend.delete(newest.id)
    after = _add(backend, "after delete")
    assert after.memory_id > newest.memory_id
    assert backend.clear(MemoryFilter()) == 2
    assert _add(backend, "after clear").memory_id > after.memory_id


def _clear_fixture(store: Store) -> dict[str, Memory]:
    b = store.backend
    made = {
        "a_s1_fact": _add(b, "a one", session_id="s1", type="factual"),
        "a_s1_epi": _add(b, "a two", session_id="s1", type="episodic"),
        "a_s2_fact": _add(b, "a three", session_id="s2", type="factual"),
        "a_old": _add(b, "a old", type="semantic"),
        "b_s1_fact": _add(b, "b one", owner="bob", session_id="s1", type="factual"),
        "c_fact": _add(b, "c one", owner="carol", type="factual"),
    }
    store.backdate(made["a_old"].id, T0)
    return made


@pytest.mark.parametrize(
    ("flt", "gone"),
    [
        (MemoryFilter(api_key_id="alice"), {"a_s1_fact", "a_s1_epi", "a_s2_fact", "a_old"}),
        (MemoryFilter(api_key_id="alice", session_id="s1"), {"a_s1_fact", "a_s1_epi"}),
        (MemoryFilter(session_id="s1"), {"a_s1_fact", "a_s1_epi", "b_s1_fact"}),
        (MemoryFilter(api_key_id="alice", type="factual"), {"a_s1_fact", "a_s2_fact"}),
        (MemoryFilter(created_before=T0 + DAY), {"a_old"}),
        (MemoryFilter(owners=frozenset({"bob", "carol"})), {"b_s1_fact", "c_fact"}),
        (MemoryFilter(q="ONE"), {"a_s1_fact", "b_s1_fact", "c_fact"}),
        (MemoryFilter(), {"a_s1_fact", "a_s1_epi", "a_s2_fact", "a_old", "b_s1_fact", "c_fact"}),
    ],
    ids=["owner", "owner+session", "session", "type", "created_before", "owners", "q", "everything"],
)
def test_clear_deletes_exactly_the_filtered_memories(store: Store, flt: MemoryFilter, gone: set[str]):
    made = _clear_fixture(store)
    assert store.backend.clear(flt) == len(gone)
    left = _ids(_all(store.backend))
    assert left == {m.id for name, m in made.items() if name not in gone}


def test_delete_hooks_see_every_deleted_row_and_can_undo_the_delete(backend):
    deleted: list[list[tuple[str, int]]] = []
    a, b, c = _add(backend, "a"), _add(backend, "b", session_id="s"), _add(backend, "c", session_id="s")
    backend.add_delete_hook(lambda handle, rows: deleted.append(sorted(rows)))
    backend.delete(a.id)
    backend.clear(MemoryFilter(session_id="s"))
    assert deleted == [[(a.id, a.memory_id)], sorted([(b.id, b.memory_id), (c.id, c.memory_id)])]
    kept = _add(backend, "kept")

    def refuse(handle, rows):
        raise RuntimeError("the derived rows could not be removed")

    backend.add_delete_hook(refuse)
    with pytest.raises(RuntimeError):
        backend.delete(kept.id)
    assert backend.get(kept.id) == kept  # removed together with its derived rows, or not at all


# -- list ------------------------------------------------------------------------------------


def test_list_is_newest_first_with_aggregates_over_the_whole_filtered_set(store: Store):
    b = store.backend
    first = _add(b, "abcde", type="episodic")  # 2 tokens
    second = _add(b, "abcd", type="procedural")  # 1 token
    third = _add(b, "a" * 9)  # 3 tokens
    _add(b, "someone else's", owner="bob")
    store.backdate(second.id, T0)  # now the oldest, though created later
    page = b.list(MemoryFilter(api_key_id="alice"), 2, 0)
    assert [m.id for m in page.data] == [third.id, first.id]
    assert page.total == 3 and page.tokens_used == 2 + 1 + 3
    assert page.by_type == {"factual": 1, "episodic": 1, "procedural": 1, "semantic": 0}
    rest = b.list(MemoryFilter(api_key_id="alice"), 2, 2)
    assert [m.id for m in rest.data] == [second.id] and rest.total == 3
    assert b.list(MemoryFilter(api_key_id="alice"), 0, 0).data == []


def test_list_of_nothing_still_has_the_four_types(backend):
    page = backend.list(MemoryFilter(api_key_id="nobody"), 10, 0)
    assert page.data == [] and page.total == 0 and page.tokens_used == 0
    assert page.by_type == dict.fromkeys(MEMORY_TYPES, 0)


def test_list_token_sum_is_the_estimate_of_each_content(backend):
    contents = ["x", "xy" * 3, "Grüße aus Köln", "你好世界"]
    for content in contents:
        _add(backend, content)
    assert backend.list(MemoryFilter(), 10, 0).tokens_used == sum(map(estimate_tokens, contents))


@pytest.mark.parametrize(
    ("flt", "want"),
    [
        (MemoryFilter(api_key_id="alice"), {"a_s1_fact", "a_s1_epi", "a_s2_fact", "a_old"}),
        (MemoryFilter(api_key_id="alice", session_id="s1", type="episodic"), {"a_s1_epi"}),
        (MemoryFilter(created_before=T0 + DAY), {"a_old"}),
        (MemoryFilter(owners=frozenset({"bob"})), {"b_s1_fact"}),
        (MemoryFilter(api_key_id="alice", q="THREE"), {"a_s2_fact"}),
    ],
    ids=["owner", "session+type", "created_before", "owners", "q"],
)
def test_list_filters(store: Store, flt: MemoryFilter, want: set[str]):
    made = _clear_fixture(store)
    page = store.backend.list(flt, 100, 0)
    assert _ids(page.data) == {made[name].id for name in want} and page.total == len(want)


def test_list_q_is_a_literal_substring_of_content_or_key_in_any_case(backend):
    percent, plain = _add(backend, "100% sure"), _add(backend, "1000 sure")
    under, other = _add(backend, "snake a_b case"), _add(backend, "snake axb case")
    umlaut = _add(backend, "Ich esse gern ÄPFEL")
    keyed = _add(backend, "nothing here", key="Favourite-Colour")
    assert _ids(_all(backend, MemoryFilter(q="0%"))) == {percent.id}
    assert plain.id in _ids(_all(backend, MemoryFilter(q="000")))
    assert _ids(_all(backend, MemoryFilter(q="a_b"))) == {under.id}
    assert other.id not in _ids(_all(backend, MemoryFilter(q="a_b")))
    assert _ids(_all(backend, MemoryFilter(q="äpfel"))) == {umlaut.id}
    assert _ids(_all(backend, MemoryFilter(q="favourite-colour"))) == {keyed.id}


# -- access counters -------------------------------------------------------------------------


def test_touch_moves_the_access_counters(backend):
    a, b, untouched = _add(backend, "a"), _add(backend, "b"), _add(backend, "c")
    before = utcnow()
    backend.touch([a.id, a.id, b.id, "00000000-0000-4000-8000-000000000000"])
    after = utcnow()
    got_a, got_b = backend.get(a.id), backend.get(b.id)
    assert (got_a.access_count, got_b.access_count) == (2, 1)
    assert before <= got_a.last_accessed_at <= after and _is_utc(got_a.last_accessed_at)
    backend.touch({b.id: 3})
    assert backend.get(b.id).access_count == 4
    backend.touch([])
    assert backend.get(untouched.id).access_count == 0 and backend.get(untouched.id).last_accessed_at is None
    assert got_a.content == "a" and got_a.updated_at == a.updated_at  # reading is not editing


# -- retrieval scope -------------------------------------------------------------------------


def _scoped_world(store: Store) -> dict[str, Memory]:
    """Memories that all contain the word "lantern": alice's in two sessions, one expired,
    one old, one old but kept, and bob's."""
    b = store.backend
    now = utcnow()
    made = {
        "s1": _add(b, "lantern in session one", session_id="s1"),
        "s2": _add(b, "lantern in session two", session_id="s2"),
        "expired": _add(b, "lantern that expired", session_id="s1", expires_at=now - timedelta(seconds=1)),
        "old": _add(b, "lantern from long ago", session_id="s1"),
        "old_kept": _add(b, "lantern kept forever", session_id="s1", keep=True),
        "old_expired": _add(b, "lantern old and expired", expires_at=now - timedelta(seconds=1)),
        "bob": _add(b, "lantern of bob", owner="bob", session_id="s1"),
        "bob_old": _add(b, "lantern of bob long ago", owner="bob"),
    }
    for name in ("old", "old_kept", "old_expired", "bob_old"):
        store.backdate(made[name].id, now - 400 * DAY)
    return made


RETENTION = 30 * DAY


def _visible(store: Store, scope: SearchScope) -> dict[str, set[str]]:
    """What each scoped read returns for the world's word, by read."""
    b = store.backend
    everything = list(b.get_many([m.id for m in _all(b)]).values())
    with_session = [m for m in everything if m.session_id is not None]
    return {
        "recent": _ids(b.recent(scope, 100)),
        "search_keyword": set(_hit_ids(b.search_keyword(scope, "lantern", 100))),
        "happened_within": _ids(b.happened_within(scope, [TimeWindow(T0 - 3650 * DAY, utcnow() + DAY)], 100)),
        "neighbours": {n.id for side in b.neighbours(scope, with_session).values() for n in side},
    }


def _names(made: dict[str, Memory], ids: set[str]) -> set[str]:
    by_id = {m.id: name for name, m in made.items()}
    return {by_id[i] for i in ids}


def test_scope_of_one_owner_sees_only_that_owners_live_memories(store: Store):
    made = _scoped_world(store)
    found = _visible(store, _scope("alice", created_after=utcnow() - RETENTION))
    want = {"s1", "s2", "old_kept"}
    for read in ("recent", "search_keyword", "happened_within"):
        assert _names(made, found[read]) == want, read
    assert _names(made, found["neighbours"]) <= want and found["neighbours"]


def test_scope_without_an_age_limit_shows_the_old_ones_but_never_the_expired(store: Store):
    made = _scoped_world(store)
    found = _visible(store, _scope("alice"))
    want = {"s1", "s2", "old", "old_kept"}
    for read in ("recent", "search_keyword", "happened_within"):
        assert _names(made, found[read]) == want, read
    assert _names(made, found["neighbours"]) <= want


def test_scope_of_one_session(store: Store):
    made = _scoped_world(store)
    found = _visible(store, _scope("alice", session_only=True, session_id="s1"))
    want = {"s1", "old", "old_kept"}
    for read in ("recent", "search_keyword", "happened_within"):
        assert _names(made, found[read]) == want, read
    assert _names(made, found["neighbours"]) <= want and found["neighbours"]


def test_global_scope_sees_every_owner(store: Store):
    made = _scoped_world(store)
    found = _visible(store, _scope(None, created_after=utcnow() - RETENTION))
    want = {"s1", "s2", "old_kept", "bob"}
    for read in ("recent", "search_keyword", "happened_within"):
        assert _names(made, found[read]) == want, read


def test_another_owners_memories_never_appear(store: Store):
    made = _scoped_world(store)
    found = _visible(store, _scope("carol"))
    assert all(ids == set() for ids in found.values()), found
    bob_only = _visible(store, _scope("bob"))
    for read in ("recent", "search_keyword", "happened_within"):
        assert _names(made, bob_only[read]) == {"bob", "bob_old"}, read
    assert _names(made, bob_only["neighbours"]) <= {"bob", "bob_old"}


def test_expiry_is_measured_at_the_scopes_now(backend):
    ends = utcnow() + DAY
    m = _add(backend, "lantern until tomorrow", expires_at=ends)
    assert _ids(backend.recent(_scope(now=ends - timedelta(microseconds=1)), 10)) == {m.id}
    assert backend.recent(_scope(now=ends), 10) == []
    assert backend.search_keyword(_scope(now=ends + DAY), "lantern", 10) == []


def test_count_aged_counts_exactly_what_the_age_limit_hides(store: Store):
    _scoped_world(store)
    b = store.backend
    limit = utcnow() - RETENTION
    assert b.count_aged(_scope("alice", created_after=limit)) == 1  # "old": not kept, not expired
    assert b.count_aged(_scope(None, created_after=limit)) == 2  # and bob's
    assert b.count_aged(_scope("alice", created_after=limit, session_only=True, session_id="s2")) == 0
    assert b.count_aged(_scope("alice")) == 0  # no age limit hides nothing
    assert b.count_aged(_scope("carol", created_after=limit)) == 0


def test_recent_is_newest_first_and_limited(store: Store):
    b = store.backend
    made = [_add(b, f"note {i}") for i in range(5)]
    store.backdate(made[4].id, T0)
    assert [m.id for m in b.recent(_scope(), 3)] == [made[3].id, made[2].id, made[1].id]
    assert [m.id for m in b.recent(_scope(), 10)][-1] == made[4].id


# -- keyword search --------------------------------------------------------------------------


def test_search_finds_a_word_of_the_content_and_of_the_key(backend):
    by_content = _add(backend, "Alice plays the violin on Sundays")
    by_key = _add(backend, "uses vim every day", key="preferred-editor")
    _add(backend, "unrelated note about gardening")
    assert _hit_ids(backend.search_keyword(_scope(), "violin", 10)) == [by_content.id]
    assert _hit_ids(backend.search_keyword(_scope(), "editor", 10)) == [by_key.id]
    assert _hit_ids(backend.search_keyword(_scope(None), "VIOLIN", 10)) == [by_content.id]
    assert backend.search_keyword(_scope(), "saxophone", 10) == []


@pytest.mark.parametrize("scope_owner", ["alice", None], ids=["owner", "global"])
def test_search_matches_plural_and_singular(backend, scope_owner):
    plural = _add(backend, "She wrote down the answers")
    singular = _add(backend, "one answer was wrong")
    assert set(_hit_ids(backend.search_keyword(_scope(scope_owner), "answer", 10))) == {plural.id, singular.id}
    assert set(_hit_ids(backend.search_keyword(_scope(scope_owner), "answers", 10))) == {plural.id, singular.id}


def test_search_follows_updates_rewrites_and_deletes(backend):
    m = _add(backend, "the cat sleeps", key="pet")
    backend.update(m.id, MemoryPatch(content="the dog barks", key="animal"))
    assert backend.search_keyword(_scope(), "cat", 10) == [] and backend.search_keyword(_scope(), "pet", 10) == []
    assert _hit_ids(backend.search_keyword(_scope(), "dog", 10)) == [m.id]
    assert _hit_ids(backend.search_keyword(_scope(), "animal", 10)) == [m.id]
    backend.create(_new("the parrot talks", key="animal"))
    assert backend.search_keyword(_scope(), "dog", 10) == []
    assert backend.rewrite_contents({m.id: "the hamster runs"}) == 1
    assert _hit_ids(backend.search_keyword(_scope(), "hamster", 10)) == [m.id]
    assert backend.search_keyword(_scope(), "parrot", 10) == []
    backend.delete(m.id)
    assert backend.search_keyword(_scope(), "hamster", 10) == []


@pytest.mark.parametrize(
    "query",
    [
        "C++",
        '"',
        '""',
        "*",
        "asterisk*",
        "(",
        ")",
        "parens(test)",
        "OR",
        "AND",
        "NOT",
        "NEAR",
        "a OR",
        "content:",
        "key:x",
        "-x",
        "^start",
        "{content}",
        "'",
        "\\",
        "%",
        "_",
        ":",
        "",
        "   ",
        "the of and",
        "Johnson & Johnson",
        "x" * 2000,
    ],
)
def test_search_never_parses_the_query_as_syntax(backend, query):
    _add(backend, "I write C++ and OR gates with parens(test) and Johnson & Johnson")
    for owner in ("alice", None):
        hits = backend.search_keyword(_scope(owner), query, 10)
        assert isinstance(hits, list)


def test_search_with_punctuation_still_finds_the_words(backend):
    m = _add(backend, "I write C++ programming daily")
    assert _hit_ids(backend.search_keyword(_scope(), '"C++ programming" (daily*', 10)) == [m.id]


@pytest.mark.parametrize("scope_owner", ["alice", None], ids=["owner", "global"])
def test_search_ranks_a_rare_word_above_a_common_one(backend, scope_owner):
    for i in range(6):
        _add(backend, f"the weather was sunny on day {i}")
    rare = _add(backend, "the trip went to zanzibar")
    hits = backend.search_keyword(_scope(scope_owner), "sunny zanzibar", 10)
    assert hits[0].memory.id == rare.id and len(hits) == 7
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert _hit_ids(backend.search_keyword(_scope(scope_owner), "sunny zanzibar", 1)) == [rare.id]


def test_search_ranks_more_matching_words_first(backend):
    one = _add(backend, "red apples in the basket")
    both = _add(backend, "red apples and green pears in the basket")
    _add(backend, "green grass")
    hits = backend.search_keyword(_scope(), "apples pears", 10)
    assert _hit_ids(hits) == [both.id, one.id]


def test_search_respects_the_limit(backend):
    for i in range(12):
        _add(backend, f"lantern number {i}")
    assert len(backend.search_keyword(_scope(), "lantern", 5)) == 5
    assert len(backend.search_keyword(_scope(None), "lantern", 5)) == 5
    assert len(backend.search_keyword(_scope(), "lantern", 50)) == 12


def test_search_finds_the_scopes_few_behind_many_better_matches_outside_it(store: Store):
    b = store.backend
    now = utcnow()
    for i in range(30):  # short rows match best, but are outside every scope below
        _add(b, "lantern", session_id="crowd", owner=f"owner{i % 3}")
        _add(b, "lantern", session_id="s1", owner="alice", expires_at=now - timedelta(seconds=1))
    weak = _add(b, "a long sentence that mentions one lantern among very many other words", session_id="s1")
    strong = _add(b, "lantern, lantern: the lantern", session_id="s1")
    for owner in ("alice", None):
        scope = _scope(owner, session_only=True, session_id="s1")
        assert _hit_ids(b.search_keyword(scope, "lantern", 2)) == [strong.id, weak.id], owner
        assert _hit_ids(b.search_keyword(scope, "lantern", 1)) == [strong.id], owner


# -- when things happened --------------------------------------------------------------------


def test_happened_within_reads_occurred_at_else_created_at_inside_start_to_end(store: Store):
    b = store.backend
    start, end = T0, T0 + DAY
    at_start = _add(b, "said at the start", occurred_at=start)
    inside = _add(b, "said inside", occurred_at=start + timedelta(hours=5))
    at_end = _add(b, "said at the end", occurred_at=end)
    stored_inside = _add(b, "no occurred_at, stored inside")
    store.backdate(stored_inside.id, start + timedelta(hours=1))
    said_outside = _add(b, "stored inside but said before", occurred_at=start - DAY)
    store.backdate(said_outside.id, start + timedelta(hours=2))
    _add(b, "bob said inside", owner="bob", occurred_at=start + timedelta(hours=3))
    found = b.happened_within(_scope(), [TimeWindow(start, end)], 10)
    assert _ids(found) == {at_start.id, inside.id, stored_inside.id}
    assert at_end.id not in _ids(found) and said_outside.id not in _ids(found)
    two = b.happened_within(_scope(), [TimeWindow(start, end), TimeWindow(end, end + DAY)], 10)
    assert _ids(two) == {at_start.id, inside.id, stored_inside.id, at_end.id}
    assert b.happened_within(_scope(), [], 10) == []


def test_happened_within_returns_up_to_limit_per_window(backend):
    first_day = [_add(backend, f"day one {i}", occurred_at=T0 + timedelta(hours=i)) for i in range(4)]
    second_day = [_add(backend, f"day two {i}", occurred_at=T0 + DAY + timedelta(hours=i)) for i in range(4)]
    found = backend.happened_within(_scope(), [TimeWindow(T0, T0 + DAY), TimeWindow(T0 + DAY, T0 + 2 * DAY)], 2)
    assert len(found) == 4 and len(_ids(found)) == 4
    assert len(_ids(found) & _ids(first_day)) == 2 and len(_ids(found) & _ids(second_day)) == 2


def _turn(backend, content: str, hour: int, session: str | None = "chat", **kw: Any) -> Memory:
    return _add(
        backend,
        content,
        session_id=session,
        type=kw.pop("type", "episodic"),
        occurred_at=T0 + timedelta(hours=hour),
        **kw,
    )


def test_neighbours_are_the_turns_before_and_after_by_when_they_were_said(backend):
    third = _turn(backend, "third", 3)  # stored first, said last
    first = _turn(backend, "first", 1)
    second = _turn(backend, "second", 2)
    _turn(backend, "a fact in between", 2, type="factual")  # another type is not a turn of this talk
    _turn(backend, "another session", 2, session="other")
    _turn(backend, "bob's turn", 2, owner="bob")
    found = backend.neighbours(_scope(), [second, first, third])
    assert [m.id for m in found[second.id]] == [first.id, third.id]
    assert [m.id for m in found.get(first.id, [])] == [second.id]
    assert [m.id for m in found.get(third.id, [])] == [second.id]
    assert backend.neighbours(_scope(), []) == {}


def test_neighbours_of_turns_said_at_one_instant_follow_the_order_they_were_stored(backend):
    first, second, third = (_turn(backend, name, 1) for name in ("first", "second", "third"))
    found = backend.neighbours(_scope(), [second, first, third])
    assert [m.id for m in found[second.id]] == [first.id, third.id]
    assert [m.id for m in found[first.id]] == [second.id] and [m.id for m in found[third.id]] == [second.id]


def test_neighbours_fall_back_to_created_at(store: Store):
    b = store.backend
    made = [_add(b, name, session_id="chat", type="episodic") for name in ("one", "two", "three")]
    for hour, m in zip((3, 1, 2), made):
        store.backdate(m.id, T0 + timedelta(hours=hour))
    one, two, three = (b.get(m.id) for m in made)
    assert [m.id for m in b.neighbours(_scope(), [three])[three.id]] == [two.id, one.id]


def test_a_memory_without_a_session_has_no_neighbours(backend):
    lone = _turn(backend, "no session", 2, session=None)
    _turn(backend, "before", 1, session=None)
    _turn(backend, "after", 3, session=None)
    assert backend.neighbours(_scope(), [lone]).get(lone.id, []) == []


def test_neighbours_apply_the_scope(backend):
    _turn(backend, "before, expired", 1, expires_at=utcnow() - timedelta(seconds=1))
    middle = _turn(backend, "middle", 2)
    after = _turn(backend, "after", 3)
    found = backend.neighbours(_scope(), [middle])
    assert [m.id for m in found[middle.id]] == [after.id]
    assert all(not ms for ms in backend.neighbours(_scope("bob"), [middle]).values())


# -- summarization and reindex ---------------------------------------------------------------


def test_older_than_is_oldest_first_by_owner_and_session(store: Store):
    b = store.backend
    made = {
        name: _add(b, name, owner=owner, session_id=session, keep=keep)
        for name, owner, session, keep in [
            ("a1", "alice", "s1", False),
            ("a2", "alice", "s2", False),
            ("kept", "alice", "s1", True),
            ("bob", "bob", "s1", False),
            ("new", "alice", "s1", False),
        ]
    }
    for days, name in ((10, "a1"), (20, "a2"), (15, "kept"), (12, "bob")):
        store.backdate(made[name].id, T0 - days * DAY)
    names = {m.id: n for n, m in made.items()}
    assert [names[m.id] for m in b.older_than("alice", T0)] == ["a2", "kept", "a1"]
    assert [names[m.id] for m in b.older_than("alice", T0, include_kept=False)] == ["a2", "a1"]
    assert [names[m.id] for m in b.older_than("alice", T0, "s1")] == ["kept", "a1"]
    assert [names[m.id] for m in b.older_than(None, T0)] == ["a2", "kept", "bob", "a1"]
    assert [names[m.id] for m in b.older_than(None, T0 - 11 * DAY)] == ["a2", "kept", "bob"]


def test_page_by_memory_id_walks_every_owner_in_memory_id_order(store: Store):
    b = store.backend
    made = [_add(b, f"m{i}", owner=("alice", "bob")[i % 2]) for i in range(7)]
    store.backdate(made[5].id, T0)  # the order is memory_id, not created_at
    pages = [b.page_by_memory_id(offset, 3) for offset in (0, 3, 6, 9)]
    assert [[m.id for m in page] for page in pages] == [
        [m.id for m in made[0:3]],
        [m.id for m in made[3:6]],
        [made[6].id],
        [],
    ]


def test_mark_all_for_reindex_counts_what_it_marked(backend):
    made = [_add(backend, f"m{i}") for i in range(3)]
    assert backend.mark_all_for_reindex() == 3
    assert all(backend.get(m.id).needs_reindex for m in made)
    assert backend.mark_all_for_reindex() == 0


def test_replace_with_summary_stores_the_summary_and_deletes_the_originals(backend):
    deleted: list[tuple[str, int]] = []
    backend.add_delete_hook(lambda handle, rows: deleted.extend(rows))
    olds = [_add(backend, f"old {i}") for i in range(3)]
    other = _add(backend, "not folded")
    result, removed = backend.replace_with_summary(
        [m.id for m in olds] + ["00000000-0000-4000-8000-000000000000"],
        _new("summary of three", type="semantic", metadata={"summarized": 3}),
    )
    assert removed == 3 and result.created
    assert sorted(deleted) == sorted((m.id, m.memory_id) for m in olds)
    summary = backend.get(result.id)
    assert (summary.content, summary.type, summary.metadata) == ("summary of three", "semantic", {"summarized": 3})
    assert _ids(_all(backend)) == {result.id, other.id}


def test_rewrite_contents_replaces_content_and_counts_rows(backend):
    a, b, c = _add(backend, "long a"), _add(backend, "long b"), _add(backend, "long c", key="k")
    changed = backend.rewrite_contents(
        {a.id: "short a", c.id: "short c", "00000000-0000-4000-8000-000000000000": "nobody"}
    )
    assert changed == 2
    got_a, got_c = backend.get(a.id), backend.get(c.id)
    assert (got_a.content, got_c.content, got_c.key) == ("short a", "short c", "k")
    assert got_a.updated_at >= a.updated_at and got_a.created_at == a.created_at
    assert backend.get(b.id) == b
    assert backend.rewrite_contents({}) == 0


# -- snapshot and health ---------------------------------------------------------------------


def test_reads_inside_a_snapshot_see_one_state(backend):
    _add(backend, "lantern one")
    created: list[UpsertResult] = []
    writer = threading.Thread(target=lambda: created.append(backend.create(_new("lantern two"))))
    with backend.snapshot():
        assert len(backend.search_keyword(_scope(), "lantern", 10)) == 1  # the snapshot starts here
        writer.start()
        writer.join(timeout=60)
        assert not writer.is_alive() and created  # a snapshot never blocks a writer
        assert len(backend.search_keyword(_scope(), "lantern", 10)) == 1
        assert len(backend.recent(_scope(), 10)) == 1
        assert backend.list(MemoryFilter(), 10, 0).total == 1
    assert len(backend.search_keyword(_scope(), "lantern", 10)) == 2
    assert backend.get(created[0].id) is not None


def test_health_and_the_keyword_probe_report_ok(backend):
    assert backend.health()["ok"] is True
    assert backend.keyword_probe() == (True, "")
