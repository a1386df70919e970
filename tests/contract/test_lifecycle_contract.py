"""The memories' lifecycle in the store, on SQLite and on a real PostgreSQL: the history each
write leaves (who, when, which fields), the versions a keyed create supersedes and the past
they answer, forgetting on delete, and the change feed's order, tenancy and resume tokens.

Both stores write the history in triggers of their own language (SQLite's migration 0013,
PostgreSQL's 0004) and read it through one `memsvc.storage.lifecycle.Lifecycle`; every test
here runs on both, so a trigger of one that diverges from the other's fails.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from memsvc.kernel.changes import caused_by
from memsvc.kernel.errors import ValidationError
from memsvc.kernel.models import MemoryFilter, MemoryPatch, NewMemory, utcnow
from memsvc.storage.sqlite_backend import SqliteMemoryBackend

TEXT_TABLES = ("memories", "memory_history", "memory_versions")


def _sqlite(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    db = request.getfixturevalue("sqlite_database")
    return db, SqliteMemoryBackend(db)


def _postgres(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    from memsvc.storage.postgres.memory_backend import PgMemoryBackend

    db = request.getfixturevalue("pg_database")
    return db, PgMemoryBackend(db)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest):
    db, backend = (_sqlite if request.param == "sqlite" else _postgres)(request)
    backend.initialize()
    return db, backend


def events(backend: Any, memory_id: str) -> list[tuple[str, str]]:
    return [(c.event, c.author) for c in backend.history(memory_id, 0, 100)]


def text_anywhere(db: Any, needle: str) -> list[str]:
    """Every table (of the memories, their history and versions) where `needle` is still
    found in any column read as text."""
    found = []
    with db.read() as conn:
        for table in TEXT_TABLES:
            for row in conn.execute(f"SELECT * FROM {table}").fetchall():
                if any(needle in str(value) for value in row):
                    found.append(table)
    return found


def test_a_creation_records_every_field_and_its_author(store):
    _, backend = store
    with caused_by(author="agent-a"):
        created = backend.create(NewMemory(api_key_id="alice", content="User drinks green tea", metadata={"s": 1}))
    [entry] = backend.history(created.id, 0, 10)
    assert (entry.event, entry.author, entry.api_key_id) == ("created", "agent-a", "alice")
    assert entry.changes == {
        "type": "factual",
        "key": None,
        "content": "User drinks green tea",
        "sessionId": None,
        "metadata": {"s": 1},
        "expiresAt": None,
        "keep": False,
        "occurredAt": None,
    }
    assert abs((entry.at - created.memory.created_at).total_seconds()) < 1


def test_a_keyed_create_that_changes_the_fact_supersedes_it_and_keeps_the_old_version(store):
    _, backend = store
    first = backend.create(NewMemory(api_key_id="alice", key="location:home", content="User lives in Paris"))
    time.sleep(0.01)
    with caused_by(author="agent-b"):
        second = backend.create(NewMemory(api_key_id="alice", key="location:home", content="User lives in Berlin"))
    assert second.id == first.id and not second.created
    history = backend.history(first.id, 0, 10)
    assert [(c.event, c.author) for c in history] == [("created", ""), ("superseded", "agent-b")]
    assert history[1].changes["content"] == "User lives in Berlin"
    [old] = backend.versions(first.id)
    assert old.content == "User lives in Paris"
    assert old.valid_to == second.memory.valid_from
    assert old.valid_since == first.memory.created_at
    # The same content again is no new fact: no version, only an update of what changed.
    backend.create(
        NewMemory(api_key_id="alice", key="location:home", content="User lives in Berlin", metadata={"x": 1})
    )
    assert len(backend.versions(first.id)) == 1
    assert backend.history(first.id, 0, 10)[-1].event == "updated"


def test_the_past_answers_with_the_version_valid_then(store):
    _, backend = store
    first = backend.create(NewMemory(api_key_id="alice", key="location:home", content="User lives in Paris"))
    before_change = utcnow()
    time.sleep(0.01)
    backend.create(NewMemory(api_key_id="alice", key="location:home", content="User lives in Berlin"))
    later = backend.create(NewMemory(api_key_id="alice", content="User bought a bicycle"))
    then = backend.as_of("alice", before_change)
    assert sorted(m.content for m in then.memories) == ["User lives in Paris"]
    assert then.newer == 2  # the Berlin fact and the bicycle began since
    now = backend.as_of("alice", utcnow())
    assert sorted(m.content for m in now.memories) == ["User bought a bicycle", "User lives in Berlin"]
    assert backend.as_of("alice", first.memory.created_at - timedelta(seconds=1)).memories == []
    assert later.id not in {m.id for m in then.memories}


def test_an_occurred_at_on_the_new_fact_says_since_when_it_holds(store):
    _, backend = store
    backend.create(NewMemory(api_key_id="alice", key="location:home", content="User lives in Paris"))
    moved = utcnow() + timedelta(hours=2)
    backend.create(
        NewMemory(api_key_id="alice", key="location:home", content="User lives in Berlin", occurred_at=moved)
    )
    assert [m.content for m in backend.as_of("alice", moved - timedelta(minutes=1)).memories] == ["User lives in Paris"]
    assert [m.content for m in backend.as_of("alice", moved).memories] == ["User lives in Berlin"]


def test_an_update_records_the_fields_it_changed_but_is_no_new_version(store):
    _, backend = store
    created = backend.create(NewMemory(api_key_id="alice", key="diet:main", content="User is vegetarian"))
    with caused_by(author="editor"):
        backend.update(created.id, MemoryPatch(content="User is vegan", keep=True, metadata={"by": "hand"}))
    entry = backend.history(created.id, 0, 10)[-1]
    assert (entry.event, entry.author) == ("updated", "editor")
    assert entry.changes == {"content": "User is vegan", "keep": True, "metadata": {"by": "hand"}}
    assert backend.versions(created.id) == []


def test_touches_and_reindex_marks_are_not_changes(store):
    _, backend = store
    created = backend.create(NewMemory(api_key_id="alice", content="User likes jazz"))
    backend.touch([created.id])
    backend.mark_all_for_reindex()
    assert [c.event for c in backend.history(created.id, 0, 10)] == ["created"]


def test_a_merge_records_the_duplicate_text_and_keeps_the_memory(store):
    _, backend = store
    kept = backend.create(NewMemory(api_key_id="alice", content="User likes jazz"))
    with caused_by(author="agent-a"):
        merged = backend.create(NewMemory(api_key_id="alice", content="The user likes jazz.", merge_into=kept.id))
    assert (merged.id, merged.created, merged.merged) == (kept.id, False, True)
    entry = backend.history(kept.id, 0, 10)[-1]
    assert (entry.event, entry.author, entry.changes) == (
        "merged",
        "agent-a",
        {"mergedContent": "The user likes jazz."},
    )
    assert backend.get(kept.id).content == "User likes jazz"
    page = backend.list(MemoryFilter(api_key_id="alice"), 10, 0)
    assert page.total == 1


def test_a_draft_repeating_an_earlier_draft_of_its_write_merges_into_what_that_became(store):
    """`repeats` names an earlier draft of the same transaction: its merges are recorded though
    the memory's updatedAt is already the transaction's (twice here), a later statement of the
    transaction (a reindex mark) is no merge, and a repeat of a draft that failed is stored."""
    _, backend = store
    drafts = [
        NewMemory(api_key_id="alice", content="User likes jazz"),
        NewMemory(api_key_id="alice", content="User likes \x00 blues"),  # refused: NUL
        NewMemory(api_key_id="alice", content="User likes blues", repeats=1),
        NewMemory(api_key_id="alice", content="The user likes jazz.", repeats=0),
        NewMemory(api_key_id="alice", content="user likes jazz", repeats=0),
    ]
    outcomes = backend.create_each(drafts, lambda conn, stored: backend.mark_all_for_reindex())
    first, refused, alone, again, third = outcomes
    assert isinstance(refused, ValidationError)
    assert (again.id, again.merged, third.id, third.merged) == (first.id, True, first.id, True)
    assert alone.created and not alone.merged and alone.id != first.id
    assert [(c.event, c.changes.get("mergedContent")) for c in backend.history(first.id, 0, 10)] == [
        ("created", None),
        ("merged", "The user likes jazz."),
        ("merged", "user likes jazz"),
    ]
    assert [c.event for c in backend.history(alone.id, 0, 10)] == ["created"]
    assert backend.list(MemoryFilter(api_key_id="alice"), 10, 0).total == 2


def test_a_merge_never_touches_another_owners_memory_and_stores_the_draft_instead(store):
    _, backend = store
    bobs = backend.create(NewMemory(api_key_id="bob", content="User likes jazz"))
    stored = backend.create(NewMemory(api_key_id="alice", content="User likes jazz", merge_into=bobs.id))
    assert stored.created and not stored.merged and stored.id != bobs.id
    assert [c.event for c in backend.history(bobs.id, 0, 10)] == ["created"]


def test_a_deletion_forgets_the_text_everywhere_and_leaves_only_the_id(store):
    db, backend = store
    secret = "User's passport number is X4471-ZANZIBAR"
    created = backend.create(NewMemory(api_key_id="alice", key="doc:passport", content=secret))
    backend.create(NewMemory(api_key_id="alice", key="doc:passport", content=secret + " (renewed)"))
    backend.update(created.id, MemoryPatch(content="Passport ZANZIBAR-2"))
    assert "memory_versions" in text_anywhere(db, "ZANZIBAR")
    with caused_by(author="alice-app"):
        assert backend.delete(created.id)
    assert text_anywhere(db, "ZANZIBAR") == []
    assert [(c.event, c.author, c.changes) for c in backend.history(created.id, 0, 10)] == [
        ("deleted", "alice-app", {})
    ]


def test_clear_forgets_every_memory_it_deletes(store):
    db, backend = store
    for n in range(3):
        backend.create(NewMemory(api_key_id="alice", content=f"Secret QUOKKA number {n}"))
    backend.create(NewMemory(api_key_id="bob", content="Bob's QUOKKA stays"))
    assert backend.clear(MemoryFilter(api_key_id="alice")) == 3
    assert sorted(set(text_anywhere(db, "QUOKKA"))) == ["memories", "memory_history"]
    assert all("Bob" in row for row in _rows_with(db, "QUOKKA"))


def _rows_with(db: Any, needle: str) -> list[str]:
    with db.read() as conn:
        return [
            str(row)
            for table in TEXT_TABLES
            for row in conn.execute(f"SELECT * FROM {table}").fetchall()
            if any(needle in str(v) for v in row)
        ]


def test_a_summary_keeps_what_it_folded_until_the_summary_itself_is_deleted(store):
    db, backend = store
    old = [backend.create(NewMemory(api_key_id="alice", content=f"Old note WOMBAT {n}")).id for n in range(2)]
    summary, deleted = backend.replace_with_summary(old, NewMemory(api_key_id="alice", content="Summary of notes"))
    assert deleted == 2
    for memory_id in old:
        entries = backend.history(memory_id, 0, 10)
        assert [e.event for e in entries] == ["created", "summarized"]
        assert entries[-1].related == summary.id
        assert backend.history_owner(memory_id) == "alice"
    # The folded notes held until the summary was made: the past before it shows them.
    past = backend.as_of("alice", summary.memory.created_at - timedelta(microseconds=1))
    assert sorted(m.content for m in past.memories) == ["Old note WOMBAT 0", "Old note WOMBAT 1"]
    assert backend.delete(summary.id)
    assert text_anywhere(db, "WOMBAT") == []


def test_expiry_removes_what_is_due_as_expired(store):
    db, backend = store
    soon = backend.create(
        NewMemory(api_key_id="alice", content="Temporary KOALA code", expires_at=utcnow() + timedelta(seconds=1))
    )
    stays = backend.create(NewMemory(api_key_id="alice", content="Lasting fact"))
    assert backend.expire_due(utcnow(), 100) == []
    removed = backend.expire_due(utcnow() + timedelta(seconds=2), 100)
    assert [m.id for m in removed] == [soon.id]
    assert [c.event for c in backend.history(soon.id, 0, 10)] == ["expired"]
    assert text_anywhere(db, "KOALA") == []
    assert backend.get(stays.id) is not None


def test_a_memory_moved_to_another_owner_takes_its_past_along(store):
    db, backend = store
    created = backend.create(NewMemory(api_key_id="character:Old", key="likes:food", content="Likes fish"))
    backend.create(NewMemory(api_key_id="character:Old", key="likes:food", content="Likes cake"))
    with db.write() as conn:
        conn.execute(
            backend.dialect.syntax.sql("UPDATE memories SET api_key_id = ? WHERE id = ?"), ("character:New", created.id)
        )
    assert {c.api_key_id for c in backend.history(created.id, 0, 10)} == {"character:New"}
    assert [v.api_key_id for v in backend.versions(created.id)] == ["character:New"]


# ---- the change feed -------------------------------------------------------------------


def read_all(backend: Any, token: str, owners: list[str] | None, limit: int = 2) -> tuple[list[Any], str]:
    """Every event after `token`, read in pages of `limit`."""
    out = []
    while True:
        page = backend.feed(token, owners, limit)
        out += page.events
        if page.token == token or not page.events:
            return out, page.token
        token = page.token


def test_the_feed_delivers_every_change_in_order_and_resumes_after_any_token(store):
    _, backend = store
    start = backend.feed_head()
    a = backend.create(NewMemory(api_key_id="alice", key="k", content="one"))
    backend.create(NewMemory(api_key_id="alice", key="k", content="two"))
    b = backend.create(NewMemory(api_key_id="bob", content="bob's"))
    c = backend.create(NewMemory(api_key_id="bob", content="carried"))
    seen_before_delete, _ = read_all(backend, start, None)
    backend.delete(b.id)
    everything, end = read_all(backend, start, None)
    assert [(e.change.event, e.change.memory_id) for e in seen_before_delete] == [
        ("created", a.id),
        ("superseded", a.id),
        ("created", b.id),
        ("created", c.id),
    ]
    # A forgotten memory's events leave the history, the feed's included; its deletion stays.
    assert [(e.change.event, e.change.memory_id) for e in everything] == [
        ("created", a.id),
        ("superseded", a.id),
        ("created", c.id),
        ("deleted", b.id),
    ]
    assert [e.kind for e in everything] == ["created", "updated", "created", "deleted"]
    assert everything[0].memory.content == "two"  # a live memory comes as it is stored now
    assert everything[3].memory is None
    for i, event in enumerate(everything):  # resuming after each event gives exactly the rest
        rest, _ = read_all(backend, event.token, None)
        assert [e.token for e in rest] == [e.token for e in everything[i + 1 :]]
    assert backend.feed(end, None, 10).events == []


def test_a_tenants_feed_carries_only_its_own_events_and_still_moves_on(store):
    _, backend = store
    start = backend.feed_head()
    backend.create(NewMemory(api_key_id="bob", content="bob 1"))
    mine = backend.create(NewMemory(api_key_id="alice", content="alice 1"))
    backend.create(NewMemory(api_key_id="bob", content="bob 2"))
    events_of_alice, token = read_all(backend, start, ["alice"])
    assert [e.change.memory_id for e in events_of_alice] == [mine.id]
    only_bob = backend.feed(start, ["carol"], 10)
    assert only_bob.events == [] and only_bob.token != start  # nothing of hers: the position moves on
    assert backend.feed(token, ["alice"], 10).events == []


def test_a_token_of_another_store_or_garbage_is_refused(store):
    _, backend = store
    other = "2.5.7" if backend.name == "sqlite" else "1.5"
    for token in (other, "x", "1.", "1.-3", "2.a.b", ""):
        with pytest.raises(ValidationError):
            backend.feed(token, None, 10)


def test_a_change_committed_after_a_page_is_in_the_next(store):
    _, backend = store
    token = backend.feed_head()
    first = backend.create(NewMemory(api_key_id="alice", content="first"))
    page = backend.feed(token, None, 10)
    assert [e.change.memory_id for e in page.events] == [first.id]
    second = backend.create(NewMemory(api_key_id="alice", content="second"))
    assert [e.change.memory_id for e in backend.feed(page.token, None, 10).events] == [second.id]
