"""Traces through the real Envoy: with OTEL_EXPORTER_OTLP_ENDPOINT set, a REST Retrieve is one
trace holding Envoy's span and memsvc's, the memsvc span named and attributed by the GenAI
memory conventions (`search_memory`) with the retrieval tiers and the embedding as its
children, all exported over OTLP/HTTP to a real receiver on loopback (decoded with the
OpenTelemetry protos). A caller's `traceparent` header is continued; query texts and memory
contents appear only when the operator opts in (MEMSVC_TRACE_CONTENT), in Envoy's span too;
with no endpoint nothing is built and nothing is sent.

The SDK's batch delay is shortened by its own standard variable (OTEL_BSP_SCHEDULE_DELAY);
Envoy exports every second. Tests poll the receiver, never sleep a fixed time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import Rest, ServerHandle, free_port, make_config, start_server
from support.serve_process import ServeProcess

from memsvc.gateway.launcher import Gateway
from memsvc.kernel import tracing
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, children, descendants, in_trace, named
from tests.support.vectors import create, set_memory, static_model, warm  # noqa: F401 - static_model is a fixture

pytestmark = pytest.mark.e2e

OWNER = "key-traced"
SECRET_QUERY = "where does the user live"
SECRET_CONTENT = "User lives in Paris"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
SERVER_KIND, INTERNAL_KIND = 2, 1
RETRIEVE = "/memsvc.v1.EngineService/Retrieve"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # the SDK's own variable: export within 0.1 s
    with OtlpReceiver() as running:
        yield running


class Traced:
    """A server and its Envoy, with the test's tracing options."""

    def __init__(self, tmp_path: Path, model: Path, **options: object):
        self.server: ServerHandle = start_server(make_config(tmp_path, static_model=str(model), **options))
        stubs = self.server.stubs()
        set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True, strategy="hybrid")
        warm(self.server)
        for text in (SECRET_CONTENT, "User's cat is called Miso", "User works as a nurse"):
            create(stubs, OWNER, text)
        self.gateway = Gateway.for_config(replace(self.server.config, rest_port=free_port()), self.server.port)
        self.gateway.start()
        self.rest = Rest(f"http://127.0.0.1:{self.gateway.settings.listen_port}")

    def retrieve(self, headers: dict[str, str] | None = None) -> dict:
        status, body = self.rest.call(
            "POST", "/api/memory/retrieve", {"apiKeyId": OWNER, "query": SECRET_QUERY}, headers=headers
        )
        assert status == 200, body
        assert body["memories"][0]["content"] == SECRET_CONTENT
        return body

    def stop(self) -> None:
        if self.gateway.process is not None and self.gateway.process.poll() is None:
            self.gateway.stop()
            self.server.stop()


@pytest.fixture
def traced(tmp_path: Path, static_model: Path) -> Iterator[Callable[..., Traced]]:
    started: list[Traced] = []

    def start(**options: object) -> Traced:
        started.append(Traced(tmp_path / f"s{len(started)}", static_model, **options))
        return started[-1]

    yield start
    for one in started:
        one.stop()


def _envoy_retrieve(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in named(spans, "ingress", "memsvc-envoy") if s.attributes.get("grpc.path") == RETRIEVE]


def _one_trace(spans: list[ReceivedSpan]) -> bool:
    """Envoy's span of a Retrieve and memsvc's search_memory under it have both arrived."""
    return any(
        s.parent_span_id == envoy.span_id
        for envoy in _envoy_retrieve(spans)
        for s in named(in_trace(spans, envoy.trace_id), "search_memory", "memsvc")
    )


def test_a_retrieve_through_envoy_is_one_trace_of_envoys_and_memsvcs_spans(traced, receiver):
    one = traced(otlp_endpoint=receiver.url)
    receiver.clear()  # the set-up's calls
    one.retrieve()
    spans = receiver.wait_for(_one_trace)
    envoy = _envoy_retrieve(spans)[0]
    trace = in_trace(spans, envoy.trace_id)
    assert {s.service for s in trace} == {"memsvc-envoy", "memsvc"}
    assert envoy.kind == SERVER_KIND and envoy.parent_span_id == ""  # the trace starts at the gateway
    (memory,) = named(trace, "search_memory")
    assert memory.parent_span_id == envoy.span_id and memory.kind == SERVER_KIND
    attributes = memory.attributes
    assert attributes["gen_ai.operation.name"] == "search_memory"
    assert attributes["gen_ai.memory.store.id"] == OWNER
    assert attributes["gen_ai.memory.record.count"] >= 1
    assert attributes["gen_ai.provider.name"] == "memsvc"
    assert (attributes["rpc.system"], attributes["rpc.service"], attributes["rpc.method"]) == (
        "grpc",
        "memsvc.v1.EngineService",
        "Retrieve",
    )
    assert attributes["rpc.grpc.status_code"] == 0 and attributes["memsvc.request.id"]
    assert attributes["memsvc.retrieval.strategy"] == "hybrid-gated-convex"
    # The retrieval's own steps, each once (an inline first run that moved to a worker thread
    # leaves no span behind), under the memory span.
    below = descendants(trace, memory)
    assert {s.name for s in children(trace, memory)} >= {"keyword_search", "vector_search"}
    assert len(named(below, "keyword_search")) == 1 and len(named(below, "vector_search")) == 1
    (keyword,) = named(below, "keyword_search")
    assert keyword.kind == INTERNAL_KIND and keyword.attributes["memsvc.retrieval.tier"] == "keyword"
    assert keyword.attributes["memsvc.retrieval.hits"] >= 1
    (vector,) = named(below, "vector_search")
    assert vector.attributes["memsvc.vector.store"] == "sqlite-vec"
    embedding = [s for s in below if s.attributes.get("gen_ai.operation.name") == "embeddings"]
    assert embedding and embedding[0].name.startswith("embeddings ")
    assert embedding[0].attributes["memsvc.embedding.source"] == "static"
    assert embedding[0].attributes["gen_ai.embeddings.dimension.count"] == 128
    for span in below:  # children lie inside their parent's time
        assert memory.start_ns <= span.start_ns <= span.end_ns <= memory.end_ns, span.name
    # No content by default, anywhere in the trace (Envoy's span included).
    assert "gen_ai.memory.query.text" not in attributes and "gen_ai.memory.records" not in attributes
    text = json.dumps([s.attributes for s in trace])
    assert SECRET_QUERY not in text and SECRET_CONTENT not in text


def test_a_traceparent_header_continues_the_callers_trace(traced, receiver):
    one = traced(otlp_endpoint=receiver.url)
    receiver.clear()
    one.retrieve(headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01", "tracestate": "vendor=1"})
    spans = receiver.wait_for(lambda got: _one_trace(in_trace(got, CALLER_TRACE)))
    trace = in_trace(spans, CALLER_TRACE)
    (envoy,) = _envoy_retrieve(trace)
    assert envoy.parent_span_id == CALLER_SPAN  # Envoy's span is a child of the caller's
    (memory,) = named(trace, "search_memory")
    assert memory.parent_span_id == envoy.span_id
    assert all(s.trace_id == CALLER_TRACE for s in descendants(trace, memory))


def test_contents_are_recorded_only_when_the_operator_opts_in(traced, receiver):
    one = traced(otlp_endpoint=receiver.url, trace_content=True)
    receiver.clear()
    one.retrieve()
    status, body = one.rest.call("GET", f"/api/memory?apiKeyId={OWNER}&q=Paris")
    assert status == 200 and body["data"], body
    spans = receiver.wait_for(
        lambda got: _one_trace(got) and named(got, "search_memory") and len(named(got, "ingress")) >= 2
    )
    retrieve = next(s for s in named(spans, "search_memory") if s.attributes["rpc.method"] == "Retrieve")
    assert retrieve.attributes["gen_ai.memory.query.text"] == SECRET_QUERY
    records = json.loads(retrieve.attributes["gen_ai.memory.records"])
    assert records[0]["content"] == SECRET_CONTENT and records[0]["id"] and "score" in records[0]
    listed = receiver.wait_for(
        lambda got: any(s.attributes.get("rpc.method") == "ListMemories" for s in named(got, "search_memory"))
    )
    listing = next(s for s in named(listed, "search_memory") if s.attributes["rpc.method"] == "ListMemories")
    assert listing.attributes["gen_ai.memory.query.text"] == "Paris"
    urls = [s.attributes.get("http.url", "") for s in named(listed, "ingress", "memsvc-envoy")]
    assert any(url.endswith("&q=Paris") for url in urls), urls  # the query string, as sent


def test_without_the_opt_in_envoys_span_drops_the_query_string(traced, receiver):
    one = traced(otlp_endpoint=receiver.url)
    receiver.clear()
    status, _ = one.rest.call("GET", f"/api/memory?apiKeyId={OWNER}&q=Paris")
    assert status == 200
    spans = receiver.wait_for(
        lambda got: named(got, "ingress") and any(s.attributes.get("rpc.method") == "ListMemories" for s in got)
    )
    (envoy,) = named(spans, "ingress", "memsvc-envoy")
    assert envoy.attributes["http.url"].endswith("/api/memory"), envoy.attributes["http.url"]
    listing = next(s for s in spans if s.attributes.get("rpc.method") == "ListMemories")
    assert "gen_ai.memory.query.text" not in listing.attributes and "gen_ai.memory.records" not in listing.attributes
    assert "Paris" not in json.dumps([s.attributes for s in spans])


def test_with_no_endpoint_nothing_is_built_and_nothing_is_sent(traced, receiver):
    one = traced()
    assert one.server.running.tracing is None and tracing.current() is None
    rendered = one.gateway.config_path.read_text()
    assert "envoy.tracers.opentelemetry" not in rendered and "otel_collector" not in rendered
    one.retrieve(headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
    one.stop()  # nothing queued anywhere could still be sent after this
    assert receiver.requests == 0


def test_memsvc_serve_traces_by_the_standard_variables_in_every_worker(tmp_path: Path, receiver):
    """As an operator runs it: `memsvc serve` with two server processes and only OTEL_*
    variables set; each worker exports its own spans, under Envoy's, and the parent, which
    serves MCP, exports the MCP SDK's span of a tool call with the worker's span under it."""
    rest_port = free_port()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100", "MEMSVC_PROCESSES": "2"}
    process = ServeProcess(tmp_path / "data", free_port(), rest_port, env_extra=env)
    try:
        process.wait_for("gateway.started")
        assert len(process.events("tracing.started")) == 3  # one pipeline per worker, one in the parent
        rest = Rest(f"http://127.0.0.1:{rest_port}")
        assert rest.call("PUT", "/api/settings/memory", {"enabled": True})[0] == 200
        assert rest.call("POST", "/api/memory", {"apiKeyId": OWNER, "content": SECRET_CONTENT})[0] == 200
        for _ in range(4):  # connections spread over both workers
            status, body = rest.call("POST", "/api/memory/retrieve", {"apiKeyId": OWNER, "query": "Paris"})
            assert status == 200 and body["memories"], body
        spans = receiver.wait_for(
            lambda got: len([e for e in _envoy_retrieve(got) if _one_trace(in_trace(got, e.trace_id))]) == 4
        )
        memory = named(spans, "search_memory", "memsvc")
        assert len(memory) == 4 and all(s.attributes["gen_ai.operation.name"] == "search_memory" for s in memory)

        search = {"name": "memory_search", "arguments": {"apiKeyId": OWNER, "query": "Paris"}}
        status, _ = rest.call(
            "POST",
            "/mcp",
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": search},
            headers={"accept": "application/json, text/event-stream"},
        )
        assert status == 200

        def tool_call_with_its_rpc(got: list[ReceivedSpan]) -> bool:
            return any(
                named(in_trace(got, tool.trace_id), "search_memory", "memsvc")
                for tool in named(got, "tools/call memory_search")
            )

        receiver.wait_for(tool_call_with_its_rpc)
    finally:
        process.stop()
