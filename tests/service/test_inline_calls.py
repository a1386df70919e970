"""Retrieve, RetrievePreview and Inject run on the server's event-loop thread while nothing in
them waits, and move to a worker thread at the first step that would: a cold owner's build,
an embedding that waits on the network, another thread holding the owner's working set.
Either way the answer is the same and the access is recorded once. `memsvc_inline_calls`
counts where each call ran."""

from __future__ import annotations

import threading

import pytest

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from tests.support.inline_calls import added, inline_calls
from tests.support.vectors import (  # noqa: F401 - models and static_model are fixtures
    create,
    models,
    remote_settings,
    set_memory,
    static_model,
    struct,
    wait_for,
    warm,
)

OWNER = "key-inline"
BUILD_STEPS = {"building an owner's working set", "loading an owner's vectors"}


def _retrieve(stubs, query: str, **fields) -> list[str]:
    resp = stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query=query, **fields))
    return [m.content for m in resp.memories]


@pytest.fixture
def static_server(boot, static_model):
    server, stubs = boot(static_model=str(static_model), access_flush_s=0.05)
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True, strategy="hybrid")
    warm(server)
    # Keyed: a keyless create looks for a duplicate, which builds the owner's working set;
    # the owner must stay cold here until the first Retrieve.
    for n, text in enumerate(("User lives in Paris", "User's cat is called Miso", "User works as a nurse")):
        create(stubs, OWNER, text, key=f"fact:{n}")
    return server, stubs


def test_a_cold_owner_runs_on_a_worker_then_a_warm_one_inline_with_the_same_answer(static_server):
    server, stubs = static_server
    before = inline_calls(server)
    cold = _retrieve(stubs, "where does the user live?")
    first = added(before, inline_calls(server))
    assert len(first) == 1 and set(first) <= BUILD_STEPS and list(first.values()) == [1.0], first
    assert cold[0] == "User lives in Paris"

    before = inline_calls(server)
    assert _retrieve(stubs, "where does the user live?") == cold
    assert added(before, inline_calls(server)) == {"inline": 1.0}


def test_a_write_is_seen_by_the_next_inline_retrieve(static_server):
    server, stubs = static_server
    _retrieve(stubs, "cat")  # builds the owner's working set and vector block
    create(stubs, OWNER, "User's dog is called Rex")
    before = inline_calls(server)
    assert "User's dog is called Rex" in _retrieve(stubs, "what is the dog called?")
    assert added(before, inline_calls(server)) == {"inline": 1.0}  # the change is applied on the loop's thread


def test_preview_and_inject_run_inline_on_a_warm_owner(static_server):
    server, stubs = static_server
    _retrieve(stubs, "cat")
    before = inline_calls(server)
    preview = stubs.engine.RetrievePreview(epb.RetrievePreviewRequest(query="cat", api_key_id=OWNER))
    assert preview.memories[0].content == "User's cat is called Miso"
    body = struct({"model": "m", "messages": [{"role": "user", "content": "what is my cat called?"}]})
    injected = stubs.engine.Inject(epb.InjectRequest(request=body, api_key_id=OWNER))
    assert injected.injected and "Miso" in str(injected.request)
    assert added(before, inline_calls(server)) == {"inline": 2.0}


def test_a_call_moved_to_a_worker_records_its_access_once(static_server):
    server, stubs = static_server
    memory_id = create(stubs, OWNER, "User rides a red bicycle", key="fact:bicycle")  # keyed: the owner stays cold
    before = inline_calls(server)
    assert _retrieve(stubs, "bicycle", limit=1) == ["User rides a red bicycle"]  # cold: tried inline, then a worker
    assert set(added(before, inline_calls(server))) <= BUILD_STEPS

    def counted() -> int:
        return stubs.memory.GetMemory(mpb.GetMemoryRequest(id=memory_id)).access_count

    assert wait_for(counted, what="the access to be recorded") == 1


def test_a_lock_another_thread_holds_moves_the_call_to_a_worker(static_server):
    server, stubs = static_server
    assert _retrieve(stubs, "nurse")[0] == "User works as a nurse"  # warm
    owner_lock = server.app.backend.working_sets._owner_lock(OWNER)
    answers: list[list[str]] = []
    before = inline_calls(server)
    with owner_lock:
        call = threading.Thread(target=lambda: answers.append(_retrieve(stubs, "nurse")))
        call.start()
        # The loop's thread did not wait for the lock: the call is on a worker, which does.
        wait_for(lambda: added(before, inline_calls(server)), what="the call to leave the loop's thread")
        assert added(before, inline_calls(server)) == {"an owner's working set in another thread's hands": 1.0}
        assert not answers
    call.join(30)
    assert answers and answers[0][0] == "User works as a nurse"


def test_an_embedding_that_waits_on_the_network_runs_on_a_worker_and_a_cached_one_inline(boot, models):
    server, stubs = boot()
    set_memory(stubs, strategy="semantic", **remote_settings(models))
    create(stubs, OWNER, "User's cat is called Miso")
    _retrieve(stubs, "a pet")  # builds what the owner needs
    before = inline_calls(server)
    first = _retrieve(stubs, "which animal lives with me?")
    assert first == ["User's cat is called Miso"]
    assert added(before, inline_calls(server)) == {"an embedding that waits": 1.0}
    calls = models.embed_calls
    before = inline_calls(server)
    assert _retrieve(stubs, "which animal lives with me?") == first  # the query's vector is cached now
    assert added(before, inline_calls(server)) == {"inline": 1.0}
    assert models.embed_calls == calls
