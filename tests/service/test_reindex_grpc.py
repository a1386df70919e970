"""Reindex through the real gRPC server: a change of embedding source resets
the sqlite-vec table and marks every row, the streamed Reindex brings pending to 0 with
monotone progress, one job at a time (ABORTED REINDEX_RUNNING before any message, or `attach`
to the running job), `force`, `limit`, and real precondition errors instead of zero counts.

The remote source is the loopback MiniLM server; "slow" mode holds a job open. Bulk runs use
a small local static model (no network, microseconds per text).
"""

from __future__ import annotations

import threading
from typing import Any

import grpc
import pytest

from memsvc.v1 import engine_pb2 as epb
from tests.support.vectors import (
    STATIC_DIM,
    STATIC_NAME,
    C,
    create,
    error,
    error_info,
    models,  # noqa: F401 - fixture
    preview,
    reindex,
    remote_settings,
    set_memory,
    sql,
    static_model,  # noqa: F401 - fixture
    status,
    stored_vector,
    vec_rows,
    wait_for,
    warm,
)

FACTS = [
    "I prefer dark mode in my editor",
    "I will use PostgreSQL for this project",
    "My cat is called Miso",
    "I usually run in the morning",
    "I always write tests first",
]


def assert_progress(messages: list[epb.ReindexProgress], total: int) -> None:
    """First {started, pending: total}; then processed never decreasing and pending never
    increasing; last state done with nothing pending."""
    first, rest = messages[0], messages[1:]
    assert first.started and first.pending == total and first.processed == 0 and first.state == "running"
    assert rest, "no progress after the first message"
    assert not any(m.started for m in rest)
    processed = [m.processed for m in messages]
    pending = [m.pending for m in messages]
    assert processed == sorted(processed), processed
    assert pending == sorted(pending, reverse=True), pending
    assert all(m.state == "running" for m in messages[:-1])
    last = messages[-1]
    assert last.state == "done" and last.pending == 0 and last.processed == total and last.errors == 0, last
    assert last.error == ""


def test_switching_the_source_changes_the_signature_resets_the_table_and_reindex_brings_pending_to_zero(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models))
    ids = [create(stubs, "key-switch", text) for text in FACTS]
    before = status(stubs).vector_store
    assert before.signature == "remote:minilm:384" and before.row_count == 5 and before.needs_reindex == 0

    set_memory(stubs, **remote_settings(models, "minilm-v2"))  # another model: another vector space
    # The next vector search notices the new signature (an owner with no rows: nothing backfilled).
    probe = preview(stubs, "anything", "key-nobody", strategy="semantic")
    assert probe.resolution.embedding_model == "minilm-v2" and probe.resolution.vector_store == "sqlite-vec"
    after = status(stubs).vector_store
    assert after.signature == "remote:minilm-v2:384" != before.signature
    assert after.row_count == 0 and vec_rows(server) == 0  # vec_memories reset
    assert after.needs_reindex == 5
    assert sql(server, "SELECT count(*) FROM memories WHERE needs_reindex = 1") == [(5,)]

    messages = reindex(stubs)
    assert_progress(messages, 5)
    done = status(stubs).vector_store
    assert done.row_count == 5 and done.needs_reindex == 0 and done.signature == "remote:minilm-v2:384"
    assert all(stored_vector(server, i) is not None for i in ids)
    assert preview(stubs, "What editor theme do I like?", "key-switch").memories[0].id == ids[0]


def test_switching_from_transformers_to_remote(boot, models):
    server, stubs = boot()
    set_memory(stubs, enabled=True, embeddingSource="transformers", transformersEnabled=True)
    warm(server)
    for text in FACTS[:3]:
        create(stubs, "key-tf-switch", text)
    assert status(stubs).vector_store.signature == "transformers:all-MiniLM-L6-v2:384"
    set_memory(stubs, **remote_settings(models))
    create(stubs, "key-tf-switch", FACTS[3])  # a write notices the new signature too
    st = status(stubs).vector_store
    assert st.signature == "remote:minilm:384" and st.row_count == 1 and st.needs_reindex == 3
    messages = reindex(stubs)
    assert_progress(messages, 3)
    assert status(stubs).vector_store.row_count == 4


def test_reindex_right_after_a_source_switch_re_embeds_with_the_new_source(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models))
    for text in FACTS:
        create(stubs, "key-switch-now", text)
    set_memory(stubs, **remote_settings(models, "minilm-v2"))
    messages = reindex(stubs)
    assert messages[0].pending == 5 and messages[-1].processed == 5
    st = status(stubs).vector_store
    assert st.signature == "remote:minilm-v2:384" and st.row_count == 5 and st.needs_reindex == 0


def test_a_large_reindex_streams_monotone_progress_force_and_limit(boot, static_model):
    server, stubs = boot(static_model=str(static_model))
    set_memory(stubs, enabled=True)  # no source yet: writes are not embedded
    total = 600  # three batches of at most 256
    for i in range(total):
        create(stubs, "key-bulk" if i % 3 else "key-bulk-2", f"bulk memory number {i} about topic {i % 17}")
    set_memory(stubs, embeddingSource="static", staticEnabled=True)
    warm(server)
    assert status(stubs).vector_store.needs_reindex == total

    messages = reindex(stubs)
    assert_progress(messages, total)
    assert len(messages) >= 1 + 3 + 1  # first, one per batch, last
    running = [m for m in messages[1:-1]]
    assert all(m.rate_per_second > 0 and m.eta_seconds >= 0 for m in running)
    assert running[-1].eta_seconds == 0
    st = status(stubs).vector_store
    assert st.row_count == total and st.needs_reindex == 0
    assert st.signature == f"static:{STATIC_NAME}:{STATIC_DIM}"

    nothing = reindex(stubs)  # nothing pending: a real zero, done at once
    assert nothing[0].started and nothing[0].pending == 0 and nothing[-1].state == "done"
    assert nothing[-1].processed == 0

    forced = reindex(stubs, force=True)  # re-embeds everything
    assert_progress(forced, total)
    assert status(stubs).vector_store.row_count == total

    limited = reindex(stubs, force=True, limit=100)
    assert limited[0].pending == 100 and limited[-1].processed == 100 and limited[-1].state == "done"
    assert status(stubs).vector_store.needs_reindex == total - 100


def test_a_second_reindex_is_aborted_before_any_message_and_attach_follows_the_running_job(boot, models):
    server, stubs = boot()
    set_memory(stubs, enabled=True)
    for text in FACTS:
        create(stubs, "key-single-flight", text)
    set_memory(stubs, **remote_settings(models))
    models.mode = "slow"
    models.delay_s = 30.0  # released by reset() below

    first = stubs.engine.Reindex(epb.ReindexRequest(), timeout=60)
    opening = next(first)
    assert opening.started and opening.pending == 5
    # The job is inside its first (slow) embedding call; the opening message can come first.
    wait_for(lambda: models.embed_calls == 1, what="the running job's first embedding call")

    second = stubs.engine.Reindex(epb.ReindexRequest(), timeout=30)
    received = []
    with pytest.raises(grpc.RpcError) as info:
        for message in second:
            received.append(message)
    assert received == []  # refused before any message
    assert info.value.code() == C.ABORTED
    assert error_info(info.value).reason == "REINDEX_RUNNING"

    attached = stubs.engine.Reindex(epb.ReindexRequest(attach=True), timeout=60)
    attached_first = next(attached)
    assert attached_first.started and attached_first.pending == 5  # the running job's stream
    assert models.embed_calls == 1  # attaching started nothing new
    models.reset()  # release the slow call: the job finishes

    rest_of_first = list(first)
    rest_of_attached = list(attached)
    assert rest_of_first[-1].state == rest_of_attached[-1].state == "done"
    assert rest_of_first[-1].processed == rest_of_attached[-1].processed == 5
    assert_progress([opening, *rest_of_first], 5)
    assert status(stubs).vector_store.row_count == 5


def test_a_client_that_disconnects_cancels_nothing(boot, models):
    server, stubs = boot()
    set_memory(stubs, enabled=True)
    for text in FACTS:
        create(stubs, "key-disconnect", text)
    set_memory(stubs, **remote_settings(models))
    models.mode = "slow"
    models.delay_s = 1.5
    call = stubs.engine.Reindex(epb.ReindexRequest(), timeout=60)
    assert next(call).pending == 5
    call.cancel()
    job = server.app.reindexer.current()
    assert job is not None and not job.finished
    # The job publishes `done` only after its last row is stored and it has seen nothing left
    # to embed, so wait for the job itself: the rows alone reach 5 a moment before that.
    wait_for(lambda: job.finished, 30, what="the job to finish on its own")
    assert job.latest().state == "done"
    assert status(stubs).vector_store.row_count == 5
    assert status(stubs).vector_store.needs_reindex == 0


def test_reindex_without_an_embedding_source_is_failed_precondition(server, stubs):
    set_memory(stubs, enabled=True)
    create(stubs, "key-no-source", "a memory that cannot be embedded")
    call = stubs.engine.Reindex(epb.ReindexRequest(), timeout=30)
    received = []
    with pytest.raises(grpc.RpcError) as info:
        for message in call:
            received.append(message)
    assert received == []
    assert info.value.code() == C.FAILED_PRECONDITION
    assert error_info(info.value).reason == "NO_EMBEDDING_SOURCE"
    assert "no embedding source" in info.value.details()


@pytest.mark.parametrize("request_fields,field", [({"target": "elsewhere"}, "target"), ({"limit": -1}, "limit")])
def test_reindex_with_bad_arguments_is_invalid_argument(boot, models, request_fields, field):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models))
    err = error(stubs.engine.Reindex, epb.ReindexRequest(**request_fields), stream=True)
    assert err.code() == C.INVALID_ARGUMENT and field in err.details()


def test_reindex_target_qdrant_while_qdrant_is_disabled_is_failed_precondition(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models))
    err = error(stubs.engine.Reindex, epb.ReindexRequest(target="qdrant"), stream=True)
    assert err.code() == C.FAILED_PRECONDITION and error_info(err).reason == "QDRANT_DISABLED"


def test_a_failing_embedder_is_reported_in_the_stream_and_rows_stay_pending(boot, models):
    server, stubs = boot()
    set_memory(stubs, enabled=True)
    for text in FACTS:
        create(stubs, "key-failing", text)
    set_memory(stubs, **remote_settings(models))
    models.mode = "fail"
    messages = reindex(stubs)
    assert messages[0].pending == 5
    last = messages[-1]
    assert last.state in ("done", "failed") and last.errors == 5 and last.processed == 0
    assert status(stubs).vector_store.needs_reindex == 5
    models.mode = "ok"
    assert_progress(reindex(stubs), 5)


def test_concurrent_callers_get_exactly_one_job(boot, models):
    server, stubs = boot()
    set_memory(stubs, enabled=True)
    for text in FACTS:
        create(stubs, "key-race", text)
    set_memory(stubs, **remote_settings(models))
    models.mode = "slow"
    models.delay_s = 0.3
    outcomes: list[Any] = []
    lock = threading.Lock()

    def call() -> None:
        try:
            result = reindex(stubs)
        except grpc.RpcError as err:
            result = err.code()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    streams = [o for o in outcomes if isinstance(o, list)]
    refused = [o for o in outcomes if not isinstance(o, list)]
    assert len(outcomes) == 4
    assert all(code == C.ABORTED for code in refused)
    assert sum(1 for s in streams if s[0].pending == 5) == 1  # one job re-embedded the five rows
    assert status(stubs).vector_store.row_count == 5
