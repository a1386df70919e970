"""Concurrent CreateMemory through the real gRPC server: creates that arrive
together are group-committed (one write transaction, their vectors inside it), each caller
is answered only once its row and vector committed, and a draft the database refuses fails
alone while the rest of its batch commits.

Batches are made deterministic without timing: the test holds the database writer, so the
first create waits inside its own batch; the next ones are seen queued behind it before the
writer is released, so they must form exactly one more batch. Transactions are counted by
`Database.commits`, and vector writes by `vec_generation`, which every transaction that
writes vectors advances once.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from conftest import make_config, start_server

from memsvc.kernel.models import SearchScope, utcnow
from memsvc.v1 import memory_pb2 as mpb
from tests.support.vectors import (
    create,
    set_memory,
    sql,
    static_model,  # noqa: F401 - fixture
    stored_vector,
    wait_for,
    warm,
)


@pytest.fixture
def static_server(tmp_path, static_model):  # noqa: F811 - the fixture above
    # Enough worker threads for every create of a test to be inside the core at once.
    handle = start_server(make_config(tmp_path, static_model=str(static_model), workers=16))
    stubs = handle.stubs()
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True)
    warm(handle)
    create(stubs, "key-warm", "the first write creates the vector table")
    yield handle, stubs
    handle.stop()


def _generation(server) -> int:
    with server.app.database.read() as conn:
        return int(conn.execute("SELECT value FROM sequences WHERE name = 'vec_generation'").fetchone()[0])


def _scope(owner: str) -> SearchScope:
    return SearchScope(api_key_id=owner, now=utcnow())


def _embed(server, text: str):
    return server.app.vectors.embeddings.embed(server.app.settings.get(), [text])[1][0]


def _call(stubs, request: mpb.CreateMemoryRequest):
    try:
        return stubs.memory.CreateMemory(request, timeout=30)
    except grpc.RpcError as err:
        return err


def _two_batches(server, stubs, first: mpb.CreateMemoryRequest, rest: list[mpb.CreateMemoryRequest]) -> list:
    """`first` leads a batch held up by the busy writer, `rest` queue behind it; then the
    writer is released. Returns the answers (responses or RpcErrors) in request order."""
    creates = server.app.memories.creates
    commits = server.app.database.commits
    pool = ThreadPoolExecutor(len(rest) + 1)
    try:
        with server.app.database.write():  # the writer is busy
            leader = pool.submit(_call, stubs, first)
            wait_for(lambda: creates.running == 1, what="the first create inside its batch")
            followers = [pool.submit(_call, stubs, r) for r in rest]
            wait_for(lambda: creates.waiting() == len(rest), what="the other creates queued")
            assert not leader.done()  # nobody was answered before its commit
        answers = [leader.result(30)] + [f.result(30) for f in followers]
        # This test's own transaction, then one per batch: memories and vectors together.
        assert server.app.database.commits - commits == 1 + 2
        return answers
    finally:
        pool.shutdown(wait=True)


def test_concurrent_creates_are_all_acknowledged_stored_and_embedded(static_server):
    server, stubs = static_server
    items_before = server.app.memories.creates.items
    requests = [
        mpb.CreateMemoryRequest(
            api_key_id=f"key-many-{i % 4}", content=f"concurrent fact number {i}", key=f"fact:{i}" if i % 3 == 0 else ""
        )
        for i in range(96)
    ]
    start = threading.Barrier(8)

    def writer(part: list[mpb.CreateMemoryRequest]) -> list[str]:
        start.wait(10)
        return [stubs.memory.CreateMemory(r, timeout=30).id for r in part]

    with ThreadPoolExecutor(8) as pool:
        ids = [i for part in pool.map(writer, [requests[k::8] for k in range(8)]) for i in part]

    assert len(set(ids)) == 96
    assert server.app.memories.creates.items - items_before == 96  # every create went through the batches
    stored = dict(sql(server, "SELECT id, content FROM memories WHERE api_key_id LIKE 'key-many-%'"))
    assert sorted(stored) == sorted(ids)
    assert sorted(stored.values()) == sorted(r.content for r in requests)
    assert all(stored_vector(server, memory_id) is not None for memory_id in ids)
    assert sql(server, "SELECT count(*) FROM memories WHERE needs_reindex = 1") == [(0,)]


def test_creates_that_arrive_together_commit_in_one_transaction_with_their_vectors(static_server):
    server, stubs = static_server
    creates = server.app.memories.creates
    batches, generation = creates.batches, _generation(server)
    requests = [
        mpb.CreateMemoryRequest(api_key_id="key-together", content=f"fact arriving together {i}") for i in range(8)
    ]
    # The same owner and key twice in one batch: one row, and the draft written second (the
    # one answered created=false) is what it holds, vector included.
    requests += [
        mpb.CreateMemoryRequest(api_key_id="key-together", key="pref:editor", content=text)
        for text in ("I prefer light mode", "I prefer dark mode in my editor")
    ]

    answers = _two_batches(server, stubs, requests[0], requests[1:])

    assert all(isinstance(a, mpb.CreateMemoryResponse) and a.success for a in answers), answers
    assert creates.batches - batches == 2  # the first create's batch, then all the others
    assert _generation(server) - generation == 2  # one vector write per transaction, not one per create
    assert answers[-1].id == answers[-2].id and sorted([answers[-2].created, answers[-1].created]) == [False, True]
    second = requests[-1] if not answers[-1].created else requests[-2]
    rows = dict(sql(server, "SELECT id, content FROM memories WHERE api_key_id = 'key-together'"))
    assert len(rows) == 9 and rows[answers[-1].id] == second.content
    assert all(stored_vector(server, a.id) is not None for a in answers)
    assert sql(server, "SELECT count(*) FROM memories WHERE needs_reindex = 1") == [(0,)]
    # Its vector is the one of the text it holds.
    nearest = server.app.vectors.local.search(_scope("key-together"), _embed(server, second.content), 1)
    assert nearest[0].id == answers[-1].id and nearest[0].distance == pytest.approx(0, abs=1e-4)


def test_a_draft_the_database_refuses_fails_alone_and_the_rest_of_its_batch_commits(static_server):
    server, stubs = static_server
    # Valid for the API, refused by the database: the kind of failure validation cannot see.
    sql(
        server,
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON memories WHEN NEW.content LIKE '%poison%' "
        "BEGIN SELECT RAISE(ABORT, 'refused by the database'); END",
    )
    batches, generation = server.app.memories.creates.batches, _generation(server)
    requests = [mpb.CreateMemoryRequest(api_key_id="key-poison", content=f"healthy fact {i}") for i in range(7)]
    requests.insert(4, mpb.CreateMemoryRequest(api_key_id="key-poison", content="a poison pill"))

    answers = _two_batches(server, stubs, requests[0], requests[1:])

    refused = answers[4]
    assert isinstance(refused, grpc.RpcError) and refused.code() == grpc.StatusCode.INTERNAL
    others = answers[:4] + answers[5:]
    assert all(isinstance(a, mpb.CreateMemoryResponse) and a.success for a in others), others
    assert server.app.memories.creates.batches - batches == 2
    assert _generation(server) - generation == 2  # the poisoned batch still committed its vectors
    rows = dict(sql(server, "SELECT id, content FROM memories WHERE api_key_id = 'key-poison'"))
    assert sorted(rows) == sorted(a.id for a in others)
    assert not any("poison" in content for content in rows.values())
    assert all(stored_vector(server, a.id) is not None for a in others)
