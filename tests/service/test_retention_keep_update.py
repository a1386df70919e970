"""Keeping an existing memory, or releasing it, with UpdateMemory `keep`, through the real
gRPC server: a kept memory older than retentionDays is retrieved again at once — by the
keyword tier and by the vector tier (sqlite-vec and the per-owner vector cache), without
being embedded again — and `keep: false` hides it again. With Qdrant as the vector store,
its points' `keep` follows (written in the background, like every Qdrant write).

Ages are moved with direct SQL: the memory's created_at and, for the vector tier, its
vector's created_us, with the vector generation bumped as any vector write does (so the
process's vector cache reloads the aged vectors before the update under test).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest

from memsvc.storage.sequences import bump_vec_generation
from memsvc.storage.sqlite_vec import NEVER_US, TABLE
from memsvc.v1 import memory_pb2 as mpb
from tests.service.test_engine_retrieval import OWNER, STRATEGIES, create, enable, ids, retrieve, struct
from tests.service.test_retention import age
from tests.support.vectors import (  # noqa: F401 - models, static_model: fixtures
    models,
    preview,
    qdrant_points,
    reindex,
    remote_settings,
    set_memory,
    set_qdrant,
    sql,
    static_model,
    status,
    stored_vector,
    wait_for,
    warm,
)

NAME = "The user's name is Ada"
NOTE = "Ada mentioned a dentist appointment"


def update(stubs, memory_id: str, **fields) -> mpb.Memory:
    return stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=memory_id, **fields)).memory


def age_with_vector(server, memory_id: str, days: int) -> None:
    """Both ages a retention check reads: the row's created_at and its vector's created_us."""
    age(server, memory_id, days)
    created_us = int((datetime.now(UTC) - timedelta(days=days)).timestamp() * 1_000_000)
    with server.app.database.write() as conn:
        conn.execute(
            f"UPDATE {TABLE} SET created_us = ? WHERE rowid = (SELECT memory_id FROM memories WHERE id = ?)",
            (created_us, memory_id),
        )
        bump_vec_generation(conn)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_update_keep_true_shows_an_aged_memory_and_false_hides_it_again(server, stubs, strategy):
    enable(stubs, retentionDays=30)
    name, note = create(stubs, NAME), create(stubs, NOTE)
    for memory_id in (name, note):
        age(server, memory_id, 400)
    before = retrieve(stubs, "Ada", strategy=strategy)
    assert ids(before) == [] and before.resolution.skipped_for_age == 2

    assert update(stubs, name, keep=True).keep
    after = retrieve(stubs, "Ada", strategy=strategy)
    assert ids(after) == [name] and after.resolution.skipped_for_age == 1
    assert stubs.memory.GetMemory(mpb.GetMemoryRequest(id=name)).keep

    assert not update(stubs, name, keep=False).keep
    again = retrieve(stubs, "Ada", strategy=strategy)
    assert ids(again) == [] and again.resolution.skipped_for_age == 2


def test_an_update_that_does_not_say_keep_leaves_it_as_it_was(server, stubs):
    enable(stubs, retentionDays=30)
    name = create(stubs, NAME, keep=True)
    age(server, name, 400)
    assert update(stubs, name, metadata=struct({"source": "profile"})).keep
    assert update(stubs, name, content="The user's name is Ada Lovelace").keep
    age(server, name, 400)
    assert ids(retrieve(stubs, "Ada")) == [name]

    released = create(stubs, NOTE)
    update(stubs, released, keep=True)
    assert not update(stubs, released, keep=False).keep
    assert not update(stubs, released, type="episodic").keep


def test_keep_alone_is_an_update_and_keep_false_on_a_fresh_memory_changes_nothing_else(server, stubs):
    enable(stubs, retentionDays=30)
    note = create(stubs, NOTE, key="note:dentist", metadata=struct({"source": "chat"}))
    got = update(stubs, note, keep=False)
    assert (got.content, got.key, dict(got.metadata), got.type, got.keep) == (
        NOTE,
        "note:dentist",
        {"source": "chat"},
        "factual",
        False,
    )
    assert ids(retrieve(stubs, "dentist")) == [note]


def test_update_keep_on_a_missing_memory_is_not_found(server, stubs):
    with pytest.raises(grpc.RpcError) as err:
        update(stubs, "no-such-memory", keep=True)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("strategy", ("semantic", "hybrid"))
def test_update_keep_reaches_the_vector_tier_and_its_cache(boot, static_model, strategy):
    server, stubs = boot(static_model=str(static_model))
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True, retentionDays=30)
    warm(server)
    name, note = create(stubs, NAME), create(stubs, NOTE)
    for memory_id in (name, note):
        age_with_vector(server, memory_id, 400)
    question = "What is the user's name?"
    before = retrieve(stubs, question, strategy=strategy)  # loads the owner's aged vectors into the cache
    assert ids(before) == [] and before.resolution.skipped_for_age == 2

    update(stubs, name, keep=True)
    after = retrieve(stubs, question, strategy=strategy)
    assert ids(after) == [name] and after.resolution.skipped_for_age == 1
    assert after.memories[0].vec_score > 0, "found by its vector, not only by its words"
    assert sql(
        server, f"SELECT created_us FROM {TABLE} WHERE rowid = (SELECT memory_id FROM memories WHERE id = ?)", (name,)
    ) == [(NEVER_US,)]

    update(stubs, name, keep=False)
    again = retrieve(stubs, question, strategy=strategy)
    assert ids(again) == [] and again.resolution.skipped_for_age == 2


def test_update_keep_does_not_embed_again(boot, models):
    server, stubs = boot(embedding_cache_max=0)  # no cache: any re-embed reaches the model server
    set_memory(stubs, **remote_settings(models), retentionDays=30)
    name = create(stubs, NAME)
    vector = stored_vector(server, name)
    calls, inputs = models.embed_calls, models.inputs
    update(stubs, name, keep=True)
    update(stubs, name, keep=False)
    assert (models.embed_calls, models.inputs) == (calls, inputs)
    assert stored_vector(server, name) == vector
    assert status(stubs).vector_store.needs_reindex == 0


def test_update_keep_reaches_qdrant_points(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models), retentionDays=30)
    set_qdrant(stubs, enabled=True, localPath="qdrant")
    name = create(stubs, NAME)
    wait_for(lambda: qdrant_points(server) == 1, what="the Qdrant point")
    age(server, name, 400)
    assert reindex(stubs, target="qdrant")[-1].state == "done"  # the point's payload now says 400 days old
    question = "What is the user's name?"
    found = preview(stubs, question, OWNER)
    assert found.resolution.vector_store == "qdrant" and ids(found) == []

    update(stubs, name, keep=True)
    found = wait_for(lambda: (r := preview(stubs, question, OWNER)).memories and r, what="the kept memory in Qdrant")
    assert ids(found) == [name] and found.memories[0].tier == "qdrant"
    update(stubs, name, keep=False)
    wait_for(lambda: not preview(stubs, question, OWNER).memories, what="the released memory hidden in Qdrant")
