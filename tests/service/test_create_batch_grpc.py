"""CreateMemories (the batch create) through the real gRPC server: every item gets its own
result in order, an invalid item fails alone with the status CreateMemory would have
answered for it, the valid items are stored in ONE write transaction with their vectors
embedded in ONE call, upserts by key behave as consecutive CreateMemory calls, and a call
refused as a whole (too many items, a foreign owner) writes nothing.

Transactions are counted by `Database.commits`; embedding calls by the requests the loopback
embeddings server receives; vector writes by `vec_generation`, which every transaction that
writes vectors advances once.
"""

from __future__ import annotations

import json
import os

import grpc
import pytest
from conftest import make_config, start_server
from grpc_status import rpc_status
from support.small_disk import fill as _fill
from support.small_disk import mounted

from memsvc.core.memories import MAX_BATCH_ITEMS
from memsvc.v1 import memory_pb2 as mpb
from tests.support.rpc_errors import error, error_info, status_violated_fields
from tests.support.vectors import (
    C,
    models,  # noqa: F401 - fixture
    preview,
    remote_settings,
    set_memory,
    sql,
    static_model,  # noqa: F401 - fixture
    stored_vector,
    struct,
    violated_fields,
    wait_for,
    warm,
)


@pytest.fixture
def static_server(boot, static_model):  # noqa: F811 - the fixture imported above
    handle, stubs = boot(static_model=str(static_model))
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True)
    warm(handle)
    stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="warm", content="the first write makes the vector table")
    )
    return handle, stubs


def item(owner: str, content: str, **fields) -> mpb.CreateMemoryRequest:
    return mpb.CreateMemoryRequest(api_key_id=owner, content=content, **fields)


def batch(stubs, items: list[mpb.CreateMemoryRequest], **kwargs) -> mpb.CreateMemoriesResponse:
    return stubs.memory.CreateMemories(mpb.CreateMemoriesRequest(memories=items), timeout=60, **kwargs)


def read(server, query: str, params: tuple = ()) -> list[tuple]:
    """A read of the server's database that commits nothing (`sql` writes)."""
    with server.app.database.read() as conn:
        return [tuple(r) for r in conn.execute(query, params).fetchall()]


def rows_of(server, owner: str) -> dict[str, str]:
    return dict(read(server, "SELECT id, content FROM memories WHERE api_key_id = ?", (owner,)))


def _generation(server) -> int:
    return int(read(server, "SELECT value FROM sequences WHERE name = 'vec_generation'")[0][0])


def _alone(stubs, request: mpb.CreateMemoryRequest):
    """The google.rpc.Status CreateMemory answers for `request` on its own."""
    return rpc_status.from_call(error(stubs.memory.CreateMemory, request))


def _too_deep(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels):
        value = {"n": value}
    return value


# ---- per-item results, one transaction, retrievable ------------------------------------------


def test_a_mixed_batch_answers_each_item_and_stores_the_valid_ones_in_one_transaction(static_server):
    server, stubs = static_server
    owner = "batch-mixed"
    items = [
        item(owner, "I prefer dark mode in my editor"),
        item(owner, "   "),  # empty content
        item(owner, "My cat is called Miso", key="pet", metadata=struct({"source": "import"})),
        item(owner, "a fact of an unknown kind", type="gossip"),  # unknown type
        item("", "a fact without an owner"),  # no apiKeyId
        item(owner, "metadata nested too deep", metadata=struct(_too_deep(32))),  # 33 objects deep: refused while read
        item(owner, "I usually run in the morning", session_id="s1", type="episodic"),
    ]
    commits, generation = server.app.database.commits, _generation(server)

    answer = batch(stubs, items)

    assert server.app.database.commits - commits == 1  # one write transaction for the whole batch
    assert _generation(server) - generation == 1  # its vectors written in that same transaction
    assert [r.success for r in answer.results] == [True, False, True, False, False, False, True]
    assert (answer.stored_count, answer.failed_count) == (3, 4)
    for index in (1, 3, 4, 5):  # exactly what CreateMemory answers for that item alone
        result = answer.results[index]
        assert not result.id and not result.created
        assert result.error == _alone(stubs, items[index]), index
    assert {index: status_violated_fields(answer.results[index].error) for index in (1, 3, 4, 5)} == {
        1: {"content"},
        3: {"type"},
        4: {"apiKeyId"},
        5: {"metadata"},
    }
    assert all(answer.results[i].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] for i in (1, 3, 4, 5))

    stored = [answer.results[i] for i in (0, 2, 6)]
    assert all(r.created and not r.HasField("error") for r in stored)
    got = [stubs.memory.GetMemory(mpb.GetMemoryRequest(id=r.id)) for r in stored]
    assert [m.content for m in got] == [items[i].content for i in (0, 2, 6)]
    assert got[1].key == "pet" and dict(got[1].metadata) == {"source": "import"}
    assert got[2].session_id == "s1" and got[2].type == "episodic"
    assert sorted(rows_of(server, owner)) == sorted(r.id for r in stored)
    assert all(stored_vector(server, r.id) is not None for r in stored)
    assert preview(stubs, "cat Miso", owner, strategy="exact").memories[0].id == stored[1].id
    found = preview(stubs, "What editor theme do I like?", owner, strategy="semantic").memories
    assert found[0].id == stored[0].id and found[0].tier == "vector"


def test_a_database_refusal_of_one_item_fails_that_item_alone(static_server):
    server, stubs = static_server
    # Valid for the API, refused by the database: the kind of failure validation cannot see.
    sql(
        server,
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON memories WHEN NEW.content LIKE '%poison%' "
        "BEGIN SELECT RAISE(ABORT, 'refused by the database'); END",
    )
    answer = batch(
        stubs,
        [
            item("batch-poison", "healthy fact one"),
            item("batch-poison", "a poison pill"),
            item("batch-poison", "healthy fact two"),
        ],
    )
    assert [r.success for r in answer.results] == [True, False, True]
    assert answer.results[1].error.code == grpc.StatusCode.INTERNAL.value[0]
    assert "refused by the database" not in answer.results[1].error.message  # sanitized, as any INTERNAL
    assert sorted(rows_of(server, "batch-poison").values()) == ["healthy fact one", "healthy fact two"]


# ---- upserts --------------------------------------------------------------------------------


def _upsert_items(owner: str) -> list[mpb.CreateMemoryRequest]:
    return [
        item(owner, "I live in Lisbon", key="home", metadata=struct({"from": "batch", "a": 1})),
        item(owner, "I moved to Porto", key="home", metadata=struct({"b": 2}), type="episodic"),
        item(owner, "I like figs", key="fruit"),
        item(owner, "no key: always a new row"),
    ]


def test_upserts_by_key_within_a_batch_and_against_stored_rows_behave_as_create_memory(static_server):
    server, stubs = static_server
    for owner in ("upsert-single", "upsert-batch"):  # the same stored row for both
        stubs.memory.CreateMemory(item(owner, "I live in Faro", key="home", metadata=struct({"old": True}), keep=True))
    singles = [stubs.memory.CreateMemory(r) for r in _upsert_items("upsert-single")]

    answer = batch(stubs, _upsert_items("upsert-batch"))

    assert [r.created for r in answer.results] == [s.created for s in singles] == [False, False, True, True]
    assert answer.results[0].id == answer.results[1].id  # both items updated the one stored row
    final = stubs.memory.GetMemory(mpb.GetMemoryRequest(id=answer.results[1].id))
    assert final.content == "I moved to Porto" and final.type == "episodic" and final.keep  # keep unset: kept
    assert dict(final.metadata) == {"old": True, "from": "batch", "a": 1, "b": 2}  # merged, item by item

    def rows(owner: str) -> list[tuple]:
        # Metadata compared as JSON values: a Struct's keys arrive in no fixed order, so the
        # stored text of the same object may list them differently.
        found = read(server, "SELECT key, content, type, metadata, keep FROM memories WHERE api_key_id = ?", (owner,))
        return sorted(((k, c, t, json.loads(m), keep) for k, c, t, m, keep in found), key=repr)

    assert rows("upsert-batch") == rows("upsert-single")
    # The updated row's vector is the one of the text it now holds.
    nearest = preview(stubs, "I moved to Porto", "upsert-batch", strategy="semantic").memories[0]
    assert nearest.id == final.id


# ---- refused as a whole -----------------------------------------------------------------------


def test_more_than_the_limit_or_no_items_is_invalid_argument_and_writes_nothing(static_server):
    server, stubs = static_server
    commits = server.app.database.commits
    too_many = [item("batch-limit", f"fact {i}") for i in range(MAX_BATCH_ITEMS + 1)]
    err = error(stubs.memory.CreateMemories, mpb.CreateMemoriesRequest(memories=too_many))
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"memories"}
    assert str(MAX_BATCH_ITEMS) in err.details()
    empty = error(stubs.memory.CreateMemories, mpb.CreateMemoriesRequest())
    assert empty.code() == C.INVALID_ARGUMENT and violated_fields(empty) == {"memories"}
    assert server.app.database.commits == commits and rows_of(server, "batch-limit") == {}

    answer = batch(stubs, too_many[:MAX_BATCH_ITEMS])  # exactly the limit is fine
    assert answer.stored_count == MAX_BATCH_ITEMS and len(rows_of(server, "batch-limit")) == MAX_BATCH_ITEMS
    assert server.app.database.commits - commits == 1


def test_an_item_naming_a_foreign_owner_refuses_the_whole_call(boot):
    server, _ = boot()
    creds = server.app.credentials
    admin = server.stubs(creds.create("batch-admin", ["admin"], [], False).token)
    tenant = server.stubs(creds.create("batch-a", ["read:memory", "write:memory"], ["batch-A"], False).token)
    reader = server.stubs(creds.create("batch-r", ["read:memory"], ["batch-A"], False).token)
    commits = server.app.database.commits

    mixed = [item("batch-A", "mine"), item("batch-B", "not mine"), item("batch-A", "mine too")]
    err = error(tenant.memory.CreateMemories, mpb.CreateMemoriesRequest(memories=mixed))
    alone = error(tenant.memory.CreateMemory, mixed[1])
    assert err.code() == alone.code() == C.PERMISSION_DENIED
    assert err.details() == alone.details()  # the same refusal as CreateMemory for that owner
    assert (
        error(reader.memory.CreateMemories, mpb.CreateMemoriesRequest(memories=mixed[:1])).code() == C.PERMISSION_DENIED
    )  # write permission needed, as for CreateMemory
    assert server.app.database.commits == commits
    assert read(server, "SELECT count(*) FROM memories") == [(0,)]

    # Its own tenant only (an item without an owner fails alone): stored.
    answer = batch(tenant, [mixed[0], mixed[2], item("", "nobody's")])
    assert [r.success for r in answer.results] == [True, True, False]
    assert status_violated_fields(answer.results[2].error) == {"apiKeyId"}
    assert [r.success for r in batch(admin, mixed).results] == [True, True, True]  # admin writes any owner


# ---- one embedding call -------------------------------------------------------------------------


def test_a_batch_is_embedded_in_one_call_to_the_remote_embedder(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models))
    stubs.memory.CreateMemory(item("warm", "the first answer sizes the vector table"))
    models.reset()
    items = [item("batch-remote", f"imported fact number {i} about topic {i * 7}") for i in range(200)]
    commits = server.app.database.commits

    answer = batch(stubs, items)

    assert answer.stored_count == 200
    assert models.embed_calls == 1 and models.inputs == 200  # one request for all 200 texts
    assert server.app.database.commits - commits == 1
    assert all(stored_vector(server, r.id) is not None for r in answer.results)
    assert read(server, "SELECT count(*) FROM memories WHERE needs_reindex = 1") == [(0,)]


def test_a_cancelled_batch_still_commits_whole(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models))
    models.mode, models.delay_s = "slow", 60.0  # the embedder holds the call until released
    items = [item("batch-cancel", f"fact that outlives its caller {i}") for i in range(50)]

    err = error(stubs.memory.CreateMemories, mpb.CreateMemoriesRequest(memories=items), timeout=1.0)

    assert err.code() == C.DEADLINE_EXCEEDED
    wait_for(lambda: models.embed_calls == 1, what="the batch inside its embedding call")
    assert rows_of(server, "batch-cancel") == {}
    models.reset()  # the embedder answers now; the caller is long gone
    wait_for(lambda: len(rows_of(server, "batch-cancel")) == 50, what="the whole batch committed")
    assert sorted(rows_of(server, "batch-cancel").values()) == sorted(i.content for i in items)


# ---- a full disk ------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    yield from mounted(tmp_path)


def test_a_full_disk_fails_the_whole_batch_and_stores_none_of_it(small_disk):
    handle = start_server(make_config(small_disk))
    try:
        stubs = handle.stubs()
        filler = small_disk / "filler"
        _fill(filler)
        items = [item("batch-full", f"fact {i} " + "x" * 4000) for i in range(MAX_BATCH_ITEMS)]

        err = error(stubs.memory.CreateMemories, mpb.CreateMemoriesRequest(memories=items))

        assert err.code() == C.RESOURCE_EXHAUSTED and error_info(err).reason == "STORAGE_FULL", err
        os.unlink(filler)
        assert rows_of(handle, "batch-full") == {}  # not one item of the refused batch was kept
        assert batch(stubs, items[:10]).stored_count == 10  # and the same call works once space is freed
        assert handle.app.database.integrity_check() == "ok"
    finally:
        handle.stop()


def test_the_database_size_limit_reached_mid_batch_fails_the_whole_batch(static_server):
    """The limit is hit after some items of the batch were written in its transaction: those
    must not commit without the rest (the database's size limit fails a write the way a full
    disk does, and needs no tmpfs to provoke)."""
    server, stubs = static_server
    pages = read(server, "PRAGMA page_count")[0][0]
    sql(server, f"PRAGMA max_page_count = {pages + 40}")  # room for a few items, not for 100
    items = [item("batch-limit-full", f"fact {i} " + "y" * 3000) for i in range(100)]
    try:
        err = error(stubs.memory.CreateMemories, mpb.CreateMemoriesRequest(memories=items))
    finally:
        sql(server, "PRAGMA max_page_count = 4294967294")
    assert err.code() == C.RESOURCE_EXHAUSTED and error_info(err).reason == "STORAGE_FULL", err
    assert rows_of(server, "batch-limit-full") == {}
    assert batch(stubs, items).stored_count == 100
