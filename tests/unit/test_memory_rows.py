"""The row → Memory mapping: exact to the row, and memoized so that moving a row's access
counters (every retrieval does) does not rebuild the memory or fold its text again."""

from __future__ import annotations

from datetime import UTC, datetime

from memsvc.storage.memory_rows import row_to_memory

ROW = (
    "0b8f6c1e-0000-4000-8000-000000000001",
    7,
    "key-rows",
    None,
    "factual",
    "preference:editor",
    "User prefers dark mode",
    '{"source":"chat"}',
    "2026-11-30T10:00:00.000000Z",
    "2026-11-30T10:00:00.000000Z",
    None,
    0,
    None,
    0,
    0,
    None,
    None,
)


def _with(**changes) -> tuple:
    names = (
        "id",
        "memory_id",
        "api_key_id",
        "session_id",
        "type",
        "key",
        "content",
        "metadata",
        "created_at",
        "updated_at",
        "expires_at",
        "access_count",
        "last_accessed_at",
        "needs_reindex",
        "keep",
        "occurred_at",
        "valid_from",
    )
    return tuple(changes.get(n, v) for n, v in zip(names, ROW))


def test_the_memory_is_exactly_the_row():
    m = row_to_memory(ROW)
    assert (m.id, m.memory_id, m.key, m.content, m.metadata) == (
        ROW[0],
        7,
        "preference:editor",
        "User prefers dark mode",
        {"source": "chat"},
    )
    assert m.created_at == datetime(2026, 11, 30, 10, tzinfo=UTC)
    assert (m.access_count, m.last_accessed_at, m.needs_reindex, m.keep) == (0, None, False, False)
    assert m.occurred_at is None and m.happened_at == m.created_at  # not known: it happened when stored


def test_occurred_at_is_read_and_is_when_it_happened():
    m = row_to_memory(_with(id="0b8f6c1e-0000-4000-8000-000000000003", occurred_at="2023-12-31T18:45:00.000000Z"))
    assert m.occurred_at == m.happened_at == datetime(2023, 12, 31, 18, 45, tzinfo=UTC)
    assert m.created_at == datetime(2026, 11, 30, 10, tzinfo=UTC)


def test_moved_access_counters_are_read_and_the_folded_text_is_reused():
    first = row_to_memory(ROW)
    folded = first.folded
    touched = row_to_memory(_with(access_count=3, last_accessed_at="2026-12-01T09:30:00.000000Z"))
    again = row_to_memory(_with(access_count=4, last_accessed_at="2026-12-01T09:31:00.000000Z"))
    assert again.folded is folded and again.access_count == 4
    assert touched.access_count == 3
    assert touched.last_accessed_at == datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    assert first.access_count == 0 and first.last_accessed_at is None  # the shared memo is not changed
    assert touched.folded is folded
    assert touched.content == first.content and touched.metadata == first.metadata


def test_copies_made_before_anything_was_folded_share_one_folding():
    """A row first read with counters already moved (the usual case for a retrieved
    memory): every copy must reuse the memo's folding, not fold on itself."""
    row = _with(
        id="0b8f6c1e-0000-4000-8000-000000000002",
        content="User lives in Lisbon",
        access_count=1,
        last_accessed_at="2026-12-01T09:00:00.000000Z",
    )
    one = row_to_memory(row)
    two = row_to_memory(
        _with(id=row[0], content=row[6], access_count=2, last_accessed_at="2026-12-01T09:01:00.000000Z")
    )
    assert one.folded is two.folded


def test_a_changed_text_is_a_new_memory():
    first = row_to_memory(ROW)
    edited = row_to_memory(_with(content="User prefers light mode", updated_at="2026-12-01T10:00:00.000000Z"))
    assert edited.content == "User prefers light mode" and "light" in edited.folded[0]
    assert first.content == "User prefers dark mode"
