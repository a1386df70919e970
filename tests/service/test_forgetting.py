"""Forgetting means forgetting: after DeleteMemory (or ClearMemories) nothing of what a memory
said remains — not in its rows, its superseded versions or its history (a merged duplicate's
text included), not in the keyword indexes (FTS5's secure-delete drops the words at once),
not in the vectors (the store's own index, Qdrant's points and payloads), and, on SQLite,
not in the bytes of the database file (secure_delete zeroes what the rows used).

Through the real gRPC server; the file scan runs after a checkpoint that folds the WAL into
the file and empties it. PostgreSQL keeps dead row versions on disk until autovacuum, so
there the check is every table's rows (tests/contract/test_lifecycle_contract.py)."""

from __future__ import annotations

from pathlib import Path

from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb
from tests.support.vectors import qdrant_points, set_memory, set_qdrant, static_model, wait_for, warm  # noqa: F401

SECRET = "Zyzzyva"  # a word no other text here holds, in any case
LINES = (
    f"My locker code at the {SECRET} gym is 4471",
    f"My locker code at the {SECRET} gym is 9902",
    f"Locker code at the {SECRET} gym is 9902",
    f"The {SECRET} gym opens at six",
)


def every_table_row(handle) -> list[tuple[str, tuple]]:
    """Every row of every table of the SQLite file (shadow tables of FTS5 and vec0 included)."""
    out = []
    with handle.app.database.read() as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            out += [(table, row) for row in conn.execute(f'SELECT * FROM "{table}"').fetchall()]
    return out


def holds(value: object, needle: str) -> bool:
    if isinstance(value, bytes):
        return needle.encode() in value or needle.lower().encode() in value
    return needle.lower() in str(value).lower()


def file_bytes(handle) -> bytes:
    with handle.app.database.write() as conn:
        conn.execute("SELECT 1").fetchall()
    handle.app.database._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    data = Path(handle.config.data_dir)
    return b"".join(p.read_bytes() for p in data.glob("*.db*") if p.is_file())


def test_a_deleted_memory_leaves_no_trace_of_its_text(boot, static_model):
    handle, stubs = boot(static_model=str(static_model))
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True)
    warm(handle)
    set_qdrant(stubs, enabled=True, localPath="qdrant")
    keep = stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", type="semantic", content="User likes hiking")
    ).id
    memory_id = stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", key="gym:locker", content=LINES[0])
    ).id
    # Superseded: the first code is a version; the repeat merges (its text is in the history).
    stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", key="gym:locker", content=LINES[1]))
    repeat = stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content=LINES[2]))
    assert repeat.merged_into == memory_id
    other = stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content=LINES[3]))
    assert other.merged_into == ""
    wait_for(lambda: qdrant_points(handle) == 3, what="three Qdrant points")
    assert any(holds(row, SECRET) for _, row in every_table_row(handle))
    assert SECRET.encode() in file_bytes(handle)

    stubs.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=memory_id))
    stubs.memory.ClearMemories(mpb.ClearMemoriesRequest(api_key_id="alice", type="factual"))  # the other one

    wait_for(lambda: qdrant_points(handle) == 1, what="the deleted memories' Qdrant points removed")
    found = stubs.settings.SearchQdrant(spb.SearchQdrantRequest(query=LINES[1], api_key_id="alice", top_k=20))
    assert [h.id for h in found.results] == [keep]
    assert all(not holds(h, SECRET) for h in found.results)
    left = [(table, row) for table, row in every_table_row(handle) if any(holds(v, SECRET) for v in row)]
    assert left == []
    data = file_bytes(handle)
    assert SECRET.encode() not in data and SECRET.lower().encode() not in data
    entries = stubs.memory.GetMemoryHistory(mpb.GetMemoryHistoryRequest(id=memory_id)).entries
    assert [e.event for e in entries] == ["deleted"]
    assert stubs.memory.GetMemory(mpb.GetMemoryRequest(id=keep)).content == "User likes hiking"
