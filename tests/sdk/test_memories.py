"""`client.memories` through the real server: add (and upsert by key), add_many, get,
update, delete, clear, one page and the paging iterator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from memsvc_client import AddResult, InvalidArgument, Memory, Memsvc, NewMemory, NotFound


def test_add_then_get_returns_every_field_as_stored(memsvc: Memsvc, owner: str) -> None:
    occurred = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    expires = datetime.now(UTC) + timedelta(days=3)
    added = memsvc.memories.add(
        "I am allergic to peanuts",
        session_id="s-1",
        type="semantic",
        key="allergy:peanuts",
        metadata={"source": "chat", "turn": 3, "tags": ["health", "food"], "confidence": 0.5},
        expires_at=expires,
        occurred_at=occurred,
        keep=True,
    )
    assert isinstance(added, AddResult) and added.created and added.id

    memory = memsvc.memories.get(added.id)
    assert isinstance(memory, Memory)
    assert (memory.id, memory.api_key_id, memory.content) == (added.id, owner, "I am allergic to peanuts")
    assert (memory.type, memory.key, memory.session_id, memory.keep) == ("semantic", "allergy:peanuts", "s-1", True)
    # Struct numbers are doubles on the wire; an integral one comes back as an int.
    assert memory.metadata == {"source": "chat", "turn": 3, "tags": ["health", "food"], "confidence": 0.5}
    assert isinstance(memory.metadata["turn"], int)
    assert memory.occurred_at == occurred
    assert memory.expires_at is not None and abs(memory.expires_at - expires) < timedelta(milliseconds=1)
    assert memory.created_at.tzinfo is not None and memory.created_at <= datetime.now(UTC)
    assert memory.raw.id == added.id  # the message it was read from


def test_a_memory_without_the_optional_fields_reads_them_as_none(memsvc: Memsvc) -> None:
    memory = memsvc.memories.get(memsvc.memories.add("plain fact").id)
    assert memory.type == "factual"  # the server's default
    assert (memory.key, memory.session_id, memory.expires_at, memory.occurred_at) == (None, None, None, None)
    assert memory.metadata == {}


def test_add_with_an_existing_key_updates_in_place(memsvc: Memsvc) -> None:
    first = memsvc.memories.add("I live in Lisbon", key="location:home")
    second = memsvc.memories.add("I live in Porto", key="location:home")
    assert first.created and not second.created and second.id == first.id
    assert memsvc.memories.get(first.id).content == "I live in Porto"


def test_the_call_s_api_key_id_wins_over_the_client_default(memsvc: Memsvc, owner: str) -> None:
    other = f"{owner}-other"
    added = memsvc.memories.add("someone else's note", api_key_id=other)
    assert memsvc.memories.get(added.id).api_key_id == other
    assert memsvc.memories.page().total == 0
    assert memsvc.memories.page(api_key_id=other).total == 1


def test_update_changes_only_the_given_fields(memsvc: Memsvc) -> None:
    added = memsvc.memories.add("I drink coffee", key="drink", metadata={"a": 1})
    when = datetime(2023, 1, 2, 3, 4, 5, tzinfo=UTC)
    updated = memsvc.memories.update(added.id, content="I drink tea", keep=True, occurred_at=when)
    assert (updated.content, updated.key, updated.keep, updated.occurred_at) == ("I drink tea", "drink", True, when)
    assert updated == memsvc.memories.get(added.id)
    retyped = memsvc.memories.update(added.id, type="procedural", metadata={"b": "x"})
    assert retyped.type == "procedural" and retyped.content == "I drink tea" and "b" in retyped.metadata


def test_delete_removes_it_and_a_second_delete_is_not_found(memsvc: Memsvc) -> None:
    added = memsvc.memories.add("to be forgotten")
    assert memsvc.memories.delete(added.id) is None
    with pytest.raises(NotFound):
        memsvc.memories.get(added.id)
    with pytest.raises(NotFound) as info:
        memsvc.memories.delete(added.id)
    assert info.value.reason == "NOT_FOUND"


def test_clear_deletes_the_owner_s_matching_memories_and_counts_them(memsvc: Memsvc, owner: str) -> None:
    memsvc.memories.add("episode one", type="episodic", session_id="a")
    memsvc.memories.add("episode two", type="episodic", session_id="b")
    memsvc.memories.add("a fact", session_id="a")
    kept = memsvc.memories.add("another tenant's", api_key_id=f"{owner}-x")

    assert memsvc.memories.clear(type="episodic", session_id="a") == 1
    assert sorted(m.content for m in memsvc.memories.list()) == ["a fact", "episode two"]
    assert memsvc.memories.clear() == 2
    assert list(memsvc.memories.list()) == []
    assert memsvc.memories.get(kept.id).content == "another tenant's"  # other owners untouched


def test_clear_older_than_keeps_newer_memories(memsvc: Memsvc) -> None:
    memsvc.memories.add("old enough")
    cutoff = datetime.now(UTC) + timedelta(seconds=1)
    assert memsvc.memories.clear(older_than=cutoff) == 1
    memsvc.memories.add("new")
    assert memsvc.memories.clear(older_than=datetime.now(UTC) - timedelta(days=1)) == 0
    assert [m.content for m in memsvc.memories.list()] == ["new"]


def test_add_many_stores_the_valid_items_and_types_each_refusal(memsvc: Memsvc, owner: str) -> None:
    result = memsvc.memories.add_many(
        [
            "a bare string item",
            NewMemory("a typed item", key="pet:cat", type="semantic"),
            {"content": "a mapping item", "session_id": "s-9"},
            NewMemory(""),  # refused: content is required
            NewMemory("for another owner", api_key_id=f"{owner}-b"),
        ]
    )
    assert (result.stored_count, result.failed_count) == (4, 1)
    assert [item.ok for item in result.items] == [True, True, True, False, True]
    refused = result.items[3]
    assert refused.id is None and isinstance(refused.error, InvalidArgument)
    assert refused.error.reason == "INVALID_ARGUMENT"
    assert "content" in {v.field for v in refused.error.field_violations}
    stored = {m.content: m for m in memsvc.memories.list()}
    assert set(stored) == {"a bare string item", "a typed item", "a mapping item"}
    assert stored["a typed item"].key == "pet:cat" and stored["a mapping item"].session_id == "s-9"
    assert memsvc.memories.get(result.ids[4] or "").api_key_id == f"{owner}-b"


def test_page_reports_totals_and_stats_over_every_match(memsvc: Memsvc) -> None:
    for i in range(5):
        memsvc.memories.add(f"note {i} about apples", type="episodic" if i % 2 else "factual")
    memsvc.memories.add("unrelated")
    page = memsvc.memories.page(query="apples", limit=2)
    assert page.total == 5 and len(page.memories) == 2 and page.offset == 0 and page.has_more
    assert page.stats.total == 5 and page.stats.by_type == {"factual": 3, "episodic": 2, "procedural": 0, "semantic": 0}
    assert [m.content for m in page.memories] == ["note 4 about apples", "note 3 about apples"]  # newest first
    last = memsvc.memories.page(query="apples", limit=2, offset=4)
    assert [m.content for m in last.memories] == ["note 0 about apples"] and not last.has_more
    assert memsvc.memories.page(type="episodic").total == 2


def test_list_follows_pages_to_the_end(memsvc: Memsvc) -> None:
    contents = [f"memory number {i}" for i in range(23)]
    assert memsvc.memories.add_many(contents).stored_count == 23
    listed = list(memsvc.memories.list(page_size=5))  # five pages, the last one short
    assert [m.content for m in listed] == list(reversed(contents))  # newest first, each once
    assert [m.content for m in memsvc.memories.list(page_size=23)] == list(reversed(contents))
    assert len(list(memsvc.memories.list(query="number 1", page_size=2))) == 11  # 1, 10..19


def test_list_is_lazy_and_sees_no_memory_twice_when_one_is_added_meanwhile(memsvc: Memsvc) -> None:
    memsvc.memories.add_many([f"item {i}" for i in range(6)])
    walk = memsvc.memories.list(page_size=3)
    first_page = [next(walk) for _ in range(3)]  # items 5, 4, 3: one page fetched
    memsvc.memories.add("added while listing")  # shifts every older memory down one place
    rest = list(walk)
    seen = [m.content for m in first_page + rest]
    assert seen == ["item 5", "item 4", "item 3", "item 2", "item 1", "item 0"]


def test_list_checks_its_page_size_before_any_call(memsvc: Memsvc) -> None:
    with pytest.raises(ValueError, match="page_size"):
        memsvc.memories.list(page_size=0)
    with pytest.raises(ValueError, match="page_size"):
        memsvc.memories.list(page_size=201)


def test_metadata_that_json_cannot_hold_is_refused_before_the_call(memsvc: Memsvc) -> None:
    with pytest.raises(TypeError, match="metadata"):
        memsvc.memories.add("x", metadata={"when": datetime.now(UTC)})
    assert memsvc.memories.page().total == 0
