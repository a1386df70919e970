"""Spans, and the names of the attributes they carry, over opentelemetry-api: free when
tracing is off.

`span(name, ...)` is what the code calls around a step worth seeing in a request's trace (a
retrieval tier, an embedding, a rerank). With no tracer in use (`use`, which the server calls when
OTEL_EXPORTER_OTLP_ENDPOINT turns tracing on) it returns one shared object that does
nothing: no context is attached, no attribute is built beyond the call's own arguments.

Inside an inline call (memsvc.kernel.inline) a span ends only once the call has run to its
end (`settle`), with the time it really ended: a first run that hands over to a worker
thread leaves no span behind, and the second run's spans are the only ones exported.

The GenAI names follow the OpenTelemetry semantic conventions for generative AI
(memory operations and embeddings, development stability); the memsvc.* ones are ours.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from contextvars import Token
from types import TracebackType
from typing import Any

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer

from memsvc.kernel.inline import settle

# gen_ai.* (the GenAI semantic conventions' registry)
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
EMBEDDINGS_DIMENSION_COUNT = "gen_ai.embeddings.dimension.count"
MEMORY_STORE_ID = "gen_ai.memory.store.id"
MEMORY_RECORD_ID = "gen_ai.memory.record.id"
MEMORY_RECORD_COUNT = "gen_ai.memory.record.count"
# Opt-in only (MEMSVC_TRACE_CONTENT): the query text and the records' contents.
MEMORY_QUERY_TEXT = "gen_ai.memory.query.text"
MEMORY_RECORDS = "gen_ai.memory.records"
ERROR_TYPE = "error.type"
# The memory operations (gen_ai.operation.name), and the embeddings one.
SEARCH_MEMORY = "search_memory"
CREATE_MEMORY = "create_memory"
UPDATE_MEMORY = "update_memory"
UPSERT_MEMORY = "upsert_memory"
DELETE_MEMORY = "delete_memory"
EMBEDDINGS = "embeddings"

# memsvc.* (ours)
RECORD_IDS = "memsvc.memory.record.ids"
CREATED = "memsvc.memory.created"
STORED = "memsvc.memory.stored"
STRATEGY = "memsvc.retrieval.strategy"
RERANKED = "memsvc.retrieval.reranked"
TIER = "memsvc.retrieval.tier"
LIMIT = "memsvc.retrieval.limit"
HITS = "memsvc.retrieval.hits"
VECTOR_STORE = "memsvc.vector.store"
EMBEDDING_SOURCE = "memsvc.embedding.source"
EMBEDDING_TEXTS = "memsvc.embedding.texts"
EMBEDDING_CACHE_HITS = "memsvc.embedding.cache_hits"
RERANK_DOCUMENTS = "memsvc.rerank.documents"

_tracer: Tracer | None = None


def use(tracer: Tracer | None) -> None:
    """The tracer spans come from from now on (None: tracing off, the default)."""
    global _tracer
    _tracer = tracer


def current() -> Tracer | None:
    return _tracer


def enabled() -> bool:
    """Whether spans are being recorded: an attribute that costs something to compute is
    worth computing only then."""
    return _tracer is not None


class _Off:
    """The span context of tracing off: one shared instance, nothing recorded."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return trace.INVALID_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


class _On:
    """A started span made current for the block; on leaving it, an exception is recorded as
    error.type (its class name only: messages may quote what a request held) and the span
    ends, at once or, inside an inline call, when the call settles."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: Token[Context] | None = None

    def __enter__(self) -> Span:
        self._token = context.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            context.detach(self._token)
        if exc_type is not None:
            failed(self._span, exc_type.__qualname__)
        settle(functools.partial(self._span.end, time.time_ns()))


def span(
    name: str, attributes: Mapping[str, Any] | None = None, kind: SpanKind = SpanKind.INTERNAL
) -> AbstractContextManager[Span]:
    """`with span("keyword_search", {TIER: "keyword"}) as s: ... s.set_attribute(HITS, n)`: a
    child of the current span when tracing is on and that span is recorded; nothing
    otherwise. Steps are seen inside a request's trace only: work outside any request (a
    background write, a start-up warm-up, a job's own thread) makes no trace of its own, nor
    does a request its sampler left out."""
    tracer = _tracer
    if tracer is None or not trace.get_current_span().is_recording():
        return _OFF
    return _On(tracer.start_span(name, kind=kind, attributes=attributes))


def failed(span: Span, error_type: str, description: str | None = None) -> None:
    """Mark `span` as failed with a low-cardinality `error.type`."""
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(StatusCode.ERROR, description)


def set_attributes(span: Span, attributes: Mapping[str, Any]) -> None:
    """The attributes whose value is not None (a missing value is left out, not sent empty)."""
    span.set_attributes({k: v for k, v in attributes.items() if v is not None})
