"""A server span for every RPC (REST through Envoy arrives as gRPC too), continuing the
caller's W3C trace context (`traceparent`, `tracestate` metadata; Envoy forwards HTTP headers
as metadata and sends its own span's context).

The RPCs that are memory operations are named and attributed by the OpenTelemetry GenAI
semantic conventions for memory (`gen_ai.memory.client`, development stability): the span
name is the operation (`search_memory`, `create_memory`, `upsert_memory`, `update_memory`,
`delete_memory`), `gen_ai.memory.store.id` is the apiKeyId (the owner whose memories the
call reads or changes: memsvc's memory store), `gen_ai.memory.record.id` the memory id
when the call names one, `gen_ai.memory.record.count` how many records it returned or
attempted to change. The query text and the records' contents (`gen_ai.memory.query.text`,
`gen_ai.memory.records`) are recorded only when the operator opts in (MEMSVC_TRACE_CONTENT).
Every other RPC gets a plain RPC span named `<service>/<method>`. All of them carry the RPC
attributes (`rpc.system` grpc, `rpc.service`, `rpc.method`, `rpc.grpc.status_code`) and the
request id of the log lines (`memsvc.request.id`).

The span kind is SERVER: this is the memory system's side of the call (the convention's
CLIENT kind is the caller's). Health and reflection calls get no span.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from memsvc.api.interceptors import EXEMPT_PREFIXES
from memsvc.kernel import tracing as t
from memsvc.logs import request_id_var

if TYPE_CHECKING:
    from memsvc.api.grpc_types import Context, Continuation, Handler, StreamBehavior, UnaryBehavior

# The W3C trace context only (not OTEL_PROPAGATORS): what Envoy and the MCP server send.
PROPAGATOR = TraceContextTextMapPropagator()
PROPAGATED = ("traceparent", "tracestate")
# Status codes that make a server span an error (the RPC semantic conventions): the others
# (a bad argument, a missing memory, a refused token) are the caller's, not the server's.
SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
# Records and ids recorded on one span at most.
MAX_RECORDS = 200
PROVIDER = "memsvc"

Attributes = dict[str, Any]


@dataclass(frozen=True)
class MemoryOperation:
    """How one RPC reads as a GenAI memory operation: `name(request)` is its
    gen_ai.operation.name (None: this request is none, as an Extract dry run);
    `before(request, content)` the attributes its request gives, `after(request, response,
    content)` those of its answer; `content` says whether contents may be recorded."""

    name: Callable[[Any], str | None]
    before: Callable[[Any, bool], Attributes]
    after: Callable[[Any, Any, bool], Attributes]


def _records(items: Sequence[Any], score: bool = False) -> str:
    """gen_ai.memory.records as its JSON schema has it: content (required), id, score."""
    out = []
    for item in items[:MAX_RECORDS]:
        record: dict[str, Any] = {"content": item.content}
        if getattr(item, "id", ""):
            record["id"] = item.id
        if score:
            record["score"] = item.score
        out.append(record)
    return json.dumps(out, ensure_ascii=False)


def _ids(items: Sequence[Any]) -> list[str]:
    return [item.id for item in items[:MAX_RECORDS] if item.id]


def _store(request: Any, content: bool) -> Attributes:
    return {t.MEMORY_STORE_ID: request.api_key_id or None}


def _searched(request: Any, content: bool, query: str) -> Attributes:
    return {t.MEMORY_STORE_ID: request.api_key_id or None, t.MEMORY_QUERY_TEXT: query if content and query else None}


def _retrieved(request: Any, response: Any, content: bool) -> Attributes:
    found = list(response.memories)
    resolution = response.resolution
    return {
        t.MEMORY_RECORD_COUNT: len(found),
        t.RECORD_IDS: _ids(found),
        t.STRATEGY: resolution.strategy_used or None,
        t.EMBEDDING_SOURCE: resolution.embedding_source or None,
        t.VECTOR_STORE: resolution.vector_store or None,
        t.RERANKED: resolution.rerank_applied,
        t.MEMORY_RECORDS: _records(found, score=True) if content else None,
    }


def _listed(request: Any, response: Any, content: bool) -> Attributes:
    found = list(response.data)
    return {
        t.MEMORY_RECORD_COUNT: len(found),
        t.RECORD_IDS: _ids(found),
        t.MEMORY_RECORDS: _records(found) if content else None,
    }


def _one_record(request: Any, content: bool) -> Attributes:
    return {t.MEMORY_RECORD_ID: request.id or None, t.MEMORY_RECORD_COUNT: 1}


def _memory_answered(memory: Any, content: bool) -> Attributes:
    """A Memory in the answer: its owner, and its content when allowed."""
    return {t.MEMORY_STORE_ID: memory.api_key_id or None, t.MEMORY_RECORDS: _records([memory]) if content else None}


def _created(request: Any, response: Any, content: bool) -> Attributes:
    record = [{"content": request.content, "id": response.id}]
    return {
        t.MEMORY_RECORD_ID: response.id or None,
        t.CREATED: response.created,
        t.MEMORY_RECORDS: json.dumps(record, ensure_ascii=False) if content else None,
    }


def _batch(request: Any, content: bool) -> Attributes:
    owners = {item.api_key_id for item in request.memories}
    return {
        t.MEMORY_STORE_ID: owners.pop() if len(owners) == 1 else None,
        t.MEMORY_RECORD_COUNT: len(request.memories),
        t.MEMORY_RECORDS: _records(list(request.memories)) if content else None,
    }


def _batch_stored(request: Any, response: Any, content: bool) -> Attributes:
    return {t.RECORD_IDS: [r.id for r in response.results[:MAX_RECORDS] if r.id], t.STORED: response.stored_count}


def _extracted(request: Any, response: Any, content: bool) -> Attributes:
    attempted = response.stored if request.wait else (len(response.facts) if response.accepted else 0)
    return {t.MEMORY_RECORD_COUNT: attempted, t.MEMORY_RECORDS: _records(list(response.facts)) if content else None}


def _none(*args: Any) -> Attributes:
    return {}


def _always(name: str) -> Callable[[Any], str | None]:
    return lambda request: name


def _writes(request: Any, keys: Sequence[str]) -> str:
    """create_memory, or upsert_memory when a key is given: a key's existing memory is
    updated in place, and the caller does not choose which happens."""
    return t.UPSERT_MEMORY if any(keys) else t.CREATE_MEMORY


_ENGINE = "/memsvc.v1.EngineService/"
_MEMORY = "/memsvc.v1.MemoryService/"
MEMORY_OPERATIONS: dict[str, MemoryOperation] = {
    _ENGINE + "Retrieve": MemoryOperation(_always(t.SEARCH_MEMORY), lambda r, c: _searched(r, c, r.query), _retrieved),
    _ENGINE + "RetrievePreview": MemoryOperation(
        _always(t.SEARCH_MEMORY), lambda r, c: _searched(r, c, r.query), _retrieved
    ),
    # The memories it injects are a search of the owner's store for the chat's last turn.
    _ENGINE + "Inject": MemoryOperation(
        _always(t.SEARCH_MEMORY),
        _store,
        lambda r, resp, c: {t.MEMORY_RECORD_COUNT: len(resp.memory_ids), t.RECORD_IDS: list(resp.memory_ids)},
    ),
    # Facts stored by their key: created, or updated in place.
    _ENGINE + "Extract": MemoryOperation(lambda r: None if r.dry_run else t.UPSERT_MEMORY, _store, _extracted),
    _MEMORY + "ListMemories": MemoryOperation(_always(t.SEARCH_MEMORY), lambda r, c: _searched(r, c, r.q), _listed),
    _MEMORY + "GetMemory": MemoryOperation(
        _always(t.SEARCH_MEMORY), _one_record, lambda r, resp, c: _memory_answered(resp, c)
    ),
    _MEMORY + "CreateMemory": MemoryOperation(
        lambda r: _writes(r, [r.key]), lambda r, c: {**_store(r, c), t.MEMORY_RECORD_COUNT: 1}, _created
    ),
    _MEMORY + "CreateMemories": MemoryOperation(
        lambda r: _writes(r, [m.key for m in r.memories]), _batch, _batch_stored
    ),
    _MEMORY + "UpdateMemory": MemoryOperation(
        _always(t.UPDATE_MEMORY), _one_record, lambda r, resp, c: _memory_answered(resp.memory, c)
    ),
    _MEMORY + "DeleteMemory": MemoryOperation(_always(t.DELETE_MEMORY), _one_record, _none),
    # A memory's history is a read of what the store recorded about it.
    _MEMORY + "GetMemoryHistory": MemoryOperation(
        _always(t.SEARCH_MEMORY),
        _one_record,
        lambda r, resp, c: {t.MEMORY_STORE_ID: resp.api_key_id or None, t.MEMORY_RECORD_COUNT: len(resp.entries)},
    ),
    # No record id: every memory of the store that matches the filter.
    _MEMORY + "ClearMemories": MemoryOperation(
        _always(t.DELETE_MEMORY), _store, lambda r, resp, c: {t.MEMORY_RECORD_COUNT: resp.deleted_count}
    ),
}


class _Call:
    """One RPC's span while it runs."""

    def __init__(self, span: Span, operation: MemoryOperation | None, request: Any, content: bool):
        self.span = span
        self._operation = operation
        self._request = request
        self._content = content

    def answered(self, response: Any) -> None:
        if self._operation is not None:
            try:
                t.set_attributes(self.span, self._operation.after(self._request, response, self._content))
            except (AttributeError, TypeError, ValueError):  # a response of another shape: no attributes
                pass


def _code(context: Context, raised: BaseException | None) -> grpc.StatusCode:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int) and code != 0:
        return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    if isinstance(raised, asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN if raised is not None else grpc.StatusCode.OK


def _parent(metadata: Sequence[tuple[str, Any]] | None) -> otel_context.Context:
    carrier: dict[str, str] = {}
    for key, value in metadata or ():
        if key in PROPAGATED:
            carrier[key] = value if isinstance(value, str) else value.decode("ascii", "replace")
    return PROPAGATOR.extract(carrier)


class TracingInterceptor(grpc.aio.ServerInterceptor):
    """Outermost in the chain: its span covers authentication too, and sees the final status."""

    def __init__(self, tracer: Tracer, content: bool = False):
        self._tracer = tracer
        self._content = content

    def _start(self, method: str, request: Any, parent: otel_context.Context) -> tuple[Span, MemoryOperation | None]:
        service, _, name = method.lstrip("/").partition("/")
        attributes: Attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}
        operation = MEMORY_OPERATIONS.get(method)
        op_name = None
        if operation is not None:
            try:
                op_name = operation.name(request)
                if op_name is not None:
                    attributes.update(operation.before(request, self._content))
            except (AttributeError, TypeError, ValueError):  # an undecodable request: a plain RPC span
                op_name = None
        if op_name is None:
            operation = None
        else:
            attributes.update({t.OPERATION_NAME: op_name, t.PROVIDER_NAME: PROVIDER})
        span_name = op_name or method.lstrip("/")
        clean = {k: v for k, v in attributes.items() if v is not None}
        return self._tracer.start_span(span_name, context=parent, kind=SpanKind.SERVER, attributes=clean), operation

    @contextmanager
    def _serving(self, method: str, parent: otel_context.Context, request: Any, context: Context) -> Iterator[_Call]:
        span, operation = self._start(method, request, parent)
        token = otel_context.attach(trace.set_span_in_context(span))
        raised: BaseException | None = None
        try:
            yield _Call(span, operation, request, self._content)
        except BaseException as exc:
            raised = exc
            raise
        finally:
            code = _code(context, raised)
            span.set_attribute("rpc.grpc.status_code", code.value[0])
            request_id = request_id_var.get()
            if request_id:
                span.set_attribute("memsvc.request.id", request_id)
            if code != grpc.StatusCode.OK:
                span.set_attribute(t.ERROR_TYPE, code.name)
            if code in SERVER_ERRORS:
                t.failed(span, code.name)
            otel_context.detach(token)
            span.end()

    async def intercept_service(self, continuation: Continuation, details: grpc.HandlerCallDetails) -> Handler | None:
        handler = await continuation(details)
        if handler is None or details.method.startswith(EXEMPT_PREFIXES) or handler.request_streaming:
            return handler
        method = details.method
        parent = _parent(details.invocation_metadata)

        # types-grpcio types a handler's behaviours for the synchronous server; under grpc.aio
        # they are coroutine (async generator) functions taking an aio ServicerContext.
        if handler.response_streaming:
            behavior = cast("StreamBehavior", handler.unary_stream)

            async def run_stream(request: Any, context: Context) -> AsyncIterator[Any]:
                with self._serving(method, parent, request, context) as call:
                    count = 0
                    async for item in behavior(request, context):
                        count += 1
                        yield item
                    call.span.set_attribute("memsvc.response.messages", count)

            return grpc.unary_stream_rpc_method_handler(
                run_stream, handler.request_deserializer, handler.response_serializer
            )
        unary = cast("UnaryBehavior", handler.unary_unary)

        async def run(request: Any, context: Context) -> Any:
            with self._serving(method, parent, request, context) as call:
                response = await unary(request, context)
                call.answered(response)
                return response

        return grpc.unary_unary_rpc_method_handler(run, handler.request_deserializer, handler.response_serializer)
