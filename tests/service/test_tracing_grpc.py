"""Spans of gRPC calls made straight to the server (no Envoy), exported over OTLP/HTTP to a
real receiver on loopback: each memory RPC named by its GenAI memory operation with its
store, record and count attributes; other RPCs a plain RPC span; the W3C trace context of
the call's metadata continued; the status code recorded, an error status only for the
server's own failures; health checks untraced; the first inline run of a cold Retrieve
leaving no span behind; a rerank and a remote embedding as spans of their own."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb
from tests.support.inline_calls import added, inline_calls
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, children, descendants, in_trace, named
from tests.support.vectors import (  # noqa: F401 - models and static_model are fixtures
    create,
    models,
    set_memory,
    static_model,
    wait_for,
    warm,
)

OWNER = "key-spans"
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
ERROR_STATUS = 2
PROVIDER_KEY = "sk-traced-provider-key"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # the SDK's own variable
    with OtlpReceiver() as running:
        yield running


def _rpc(receiver: OtlpReceiver, method: str, count: int = 1) -> list[ReceivedSpan]:
    """The server spans of `method` (rpc.method), once `count` of them have arrived."""

    def found(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        return [s for s in spans if s.kind == 2 and s.attributes.get("rpc.method") == method]

    return found(receiver.wait_for(lambda spans: len(found(spans)) >= count))


def test_each_memory_rpc_is_named_by_its_genai_memory_operation(boot, receiver):
    server, stubs = boot(otlp_endpoint=receiver.url)
    set_memory(stubs, enabled=True)
    plain = stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id=OWNER, content="User likes tea"))
    keyed = stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id=OWNER, key="pet:cat", content="Cat: Miso"))
    stubs.memory.GetMemory(mpb.GetMemoryRequest(id=plain.id))
    stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=plain.id, content="User likes green tea"))
    stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=OWNER, q="tea"))
    stubs.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=keyed.id))
    stubs.memory.ClearMemories(mpb.ClearMemoriesRequest(api_key_id=OWNER))
    stubs.engine.Extract(epb.ExtractRequest(text="I prefer short answers.", api_key_id=OWNER, wait=True))
    stubs.engine.Extract(epb.ExtractRequest(text="I prefer short answers.", api_key_id=OWNER, dry_run=True))
    stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest())

    creates = _rpc(receiver, "CreateMemory", 2)
    by_record = {s.attributes["gen_ai.memory.record.id"]: s for s in creates}
    assert by_record[plain.id].name == "create_memory"  # no key: always a new memory
    assert by_record[keyed.id].name == "upsert_memory"  # a key's memory is created or updated in place
    for span in creates:
        assert span.attributes["gen_ai.operation.name"] == span.name
        assert span.attributes["gen_ai.memory.store.id"] == OWNER
        assert span.attributes["gen_ai.memory.record.count"] == 1
    (get,) = _rpc(receiver, "GetMemory")
    assert get.name == "search_memory" and get.attributes["gen_ai.memory.record.id"] == plain.id
    assert get.attributes["gen_ai.memory.store.id"] == OWNER  # learnt from the answer
    (update,) = _rpc(receiver, "UpdateMemory")
    assert update.name == "update_memory" and update.attributes["gen_ai.memory.record.id"] == plain.id
    (listing,) = _rpc(receiver, "ListMemories")
    assert listing.name == "search_memory" and listing.attributes["gen_ai.memory.record.count"] == 1
    assert listing.attributes["memsvc.memory.record.ids"] == [plain.id]
    (delete,) = _rpc(receiver, "DeleteMemory")
    assert delete.name == "delete_memory" and delete.attributes["gen_ai.memory.record.id"] == keyed.id
    (clear,) = _rpc(receiver, "ClearMemories")
    # No record id: the operation deletes every record of the store (that the filter selects).
    assert clear.name == "delete_memory" and "gen_ai.memory.record.id" not in clear.attributes
    assert clear.attributes["gen_ai.memory.store.id"] == OWNER and clear.attributes["gen_ai.memory.record.count"] == 1
    stored, dry = _rpc(receiver, "Extract", 2)
    assert stored.name == "upsert_memory" and stored.attributes["gen_ai.memory.record.count"] >= 1
    assert dry.name == "memsvc.v1.EngineService/Extract" and "gen_ai.operation.name" not in dry.attributes
    (settings,) = _rpc(receiver, "GetMemorySettings")
    assert _rpc(receiver, "UpdateMemorySettings")[0].name == "memsvc.v1.SettingsService/UpdateMemorySettings"
    assert settings.name == "memsvc.v1.SettingsService/GetMemorySettings"
    assert settings.attributes["rpc.service"] == "memsvc.v1.SettingsService"
    assert not [k for k in settings.attributes if k.startswith("gen_ai.")]
    # Contents are opt-in: none of these spans carries one.
    for span in receiver.spans():
        assert "gen_ai.memory.query.text" not in span.attributes and "gen_ai.memory.records" not in span.attributes


def test_the_trace_context_of_the_calls_metadata_is_continued(boot, receiver):
    server, stubs = boot(otlp_endpoint=receiver.url)
    metadata = (("traceparent", f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"),)
    stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="tea"), metadata=metadata)
    stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="coffee"))
    continued, fresh = _rpc(receiver, "Retrieve", 2)
    if continued.trace_id != CALLER_TRACE:
        continued, fresh = fresh, continued
    assert (continued.trace_id, continued.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert fresh.trace_id != CALLER_TRACE and fresh.parent_span_id == ""


def test_status_codes_are_recorded_and_only_server_failures_are_errors(boot, receiver):
    server, stubs = boot(otlp_endpoint=receiver.url)
    with pytest.raises(grpc.RpcError) as missing:
        stubs.memory.GetMemory(mpb.GetMemoryRequest(id="no-such-memory"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError):
        stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id=OWNER))  # no content
    health_pb2_grpc.HealthStub(server.channel()).Check(health_pb2.HealthCheckRequest())
    (get,) = _rpc(receiver, "GetMemory")
    assert get.attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert get.attributes["error.type"] == "NOT_FOUND"
    assert get.status_code != ERROR_STATUS  # the caller's mistake, not the server's failure
    (bad,) = _rpc(receiver, "CreateMemory")
    assert bad.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert not [s for s in receiver.spans() if s.attributes.get("rpc.service", "").startswith("grpc.health")]


def test_a_cold_retrieve_that_moves_to_a_worker_leaves_one_span_per_step(boot, receiver, static_model):
    server, stubs = boot(otlp_endpoint=receiver.url, static_model=str(static_model))
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True, strategy="hybrid")
    warm(server)
    # Keyed: a keyless create looks for a duplicate, which builds the owner's working set;
    # the owner must stay cold here until the first Retrieve.
    for n, text in enumerate(("User lives in Paris", "User's cat is called Miso", "User works as a nurse")):
        create(stubs, OWNER, text, key=f"fact:{n}")
    before = inline_calls(server)
    stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="where does the user live?"))
    assert "inline" not in added(before, inline_calls(server))  # its inline run was abandoned for a worker
    before = inline_calls(server)
    stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="what is the cat called?"))
    assert added(before, inline_calls(server)) == {"inline": 1.0}  # this one ran inline to its end
    for retrieve in _rpc(receiver, "Retrieve", 2):
        spans = receiver.wait_for(lambda got, r=retrieve: len(named(descendants(got, r), "keyword_search")) >= 1)
        below = descendants(in_trace(spans, retrieve.trace_id), retrieve)
        assert len(named(below, "keyword_search")) == 1, [s.name for s in below]
        assert len(named(below, "vector_search")) == 1, [s.name for s in below]
        top = [s for s in children(spans, retrieve) if s.attributes.get("gen_ai.operation.name") == "embeddings"]
        assert len(top) == 1, [s.name for s in below]  # the query's embedding, once


def test_a_remote_embedding_and_a_rerank_are_spans_of_their_own(boot, receiver, models):
    models.api_key = PROVIDER_KEY
    server, stubs = boot(
        otlp_endpoint=receiver.url,
        embedding_providers=(("local", models.base_url),),
        embedding_api_keys=(("local", PROVIDER_KEY),),
    )
    set_memory(
        stubs,
        enabled=True,
        embeddingSource="remote",
        embeddingProviderModel="local/minilm",
        rerankEnabled=True,
        rerankProviderModel="local/minilm",
    )
    for text in ("note: my cat is called Miso", "User works as a nurse"):
        create(stubs, OWNER, text)
    stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=OWNER, query="what is my cat called?"))
    (retrieve,) = _rpc(receiver, "Retrieve")
    spans = receiver.wait_for(lambda got: named(descendants(got, retrieve), "rerank"))
    below = descendants(spans, retrieve)
    (rerank,) = named(below, "rerank")
    assert rerank.attributes["gen_ai.request.model"] == "local/minilm"
    assert rerank.attributes["memsvc.rerank.documents"] == 2
    assert retrieve.attributes["memsvc.retrieval.reranked"] is True
    (embedding,) = [s for s in children(spans, retrieve) if s.attributes.get("gen_ai.operation.name") == "embeddings"]
    assert embedding.name == "embeddings minilm" and embedding.kind == 3  # CLIENT: a call over the network
    assert embedding.attributes["memsvc.embedding.source"] == "remote"
    assert embedding.attributes["gen_ai.embeddings.dimension.count"] == 384


def test_work_outside_a_request_makes_no_trace_of_its_own(boot, receiver, static_model):
    """A background extraction embeds its facts after the Extract call has answered, outside
    any request's span: no trace of a lone embedding; every trace starts at an RPC's span."""
    server, stubs = boot(otlp_endpoint=receiver.url, static_model=str(static_model))
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True, strategy="hybrid")
    warm(server)
    answer = stubs.engine.Extract(epb.ExtractRequest(text="I prefer short answers.", api_key_id=OWNER))
    assert answer.accepted  # stored in the background
    wait_for(lambda: stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=OWNER)).data, what="the facts")
    stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=OWNER))
    _rpc(receiver, "ListMemories", 2)  # spans export in the order they ended: the lone one would be here by now
    spans = receiver.spans()
    assert named(spans, "upsert_memory")  # the Extract call's own span
    roots = [s for s in spans if not s.parent_span_id]
    assert roots and all(s.kind == 2 for s in roots), [(s.name, s.kind) for s in roots]
