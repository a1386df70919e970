"""W3C trace context for the RPCs an MCP request makes, so memsvc's spans join the agent's
trace.

An agent puts `traceparent` (and `tracestate`) in a request's `_meta`. The SDK's server
middleware (OpenTelemetryMiddleware, first in every MCPServer's chain) takes them out of it
(with the configured propagators, W3C by default) and makes its span for the request the
current one: a recording span when an OpenTelemetry SDK is set up in this process, else a
non-recording one that carries the agent's context unchanged. Every RPC a handler then makes
carries that context as `traceparent`/`tracestate` gRPC metadata, W3C whatever
OTEL_PROPAGATORS says, since that is what memsvc's gRPC server reads (memsvc.api.tracing). A
request without trace context sends none, unless tracing is on here (then the MCP span is the
root).
"""

from __future__ import annotations

from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_W3C = TraceContextTextMapPropagator()


def trace_metadata() -> tuple[tuple[str, str], ...]:
    """The current trace context as gRPC metadata entries (none outside a trace). The W3C
    propagator writes only well-formed values (printable ASCII, as metadata must be)."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return tuple((key, carrier[key]) for key in ("traceparent", "tracestate") if key in carrier)
