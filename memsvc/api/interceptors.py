"""Per-request concerns, as grpc.aio interceptors, outermost first:

1. RequestContextInterceptor: request id (from `x-request-id`, which Envoy sets, or new),
   one structured log line per RPC with its status and duration.
2. AuthInterceptor: bearer tokens, compared in constant time; health and reflection exempt.
3. ErrorInterceptor: domain exceptions → status + details via `memsvc.api.errors`, so the
   servicers stay one-liners and no method maps errors by hand.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
import uuid
from typing import Any, AsyncIterator, Awaitable, Callable

import grpc

from memsvc.api.errors import UnauthenticatedError, abort
from memsvc.logs import request_id_var

log = logging.getLogger("memsvc.rpc")

EXEMPT_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.v1alpha.ServerReflection/",
                   "/grpc.reflection.v1.ServerReflection/")
UnaryBehavior = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
StreamBehavior = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]


def _wrap(handler: grpc.RpcMethodHandler,
          unary: Callable[[UnaryBehavior], UnaryBehavior],
          stream: Callable[[StreamBehavior], StreamBehavior]) -> grpc.RpcMethodHandler:
    """Rebuild a method handler with its behaviour wrapped; memsvc has only unary-unary and
    unary-stream methods (client streaming is passed through untouched)."""
    if handler.request_streaming:
        return handler
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(stream(handler.unary_stream), handler.request_deserializer,
                                                    handler.response_serializer)
    return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), handler.request_deserializer,
                                               handler.response_serializer)


def _metadata(details: grpc.HandlerCallDetails, key: str) -> str | None:
    for k, v in details.invocation_metadata or ():
        if k == key:
            return v if isinstance(v, str) else v.decode("utf-8", "replace")
    return None


def _is_exempt(method: str) -> bool:
    return method.startswith(EXEMPT_PREFIXES)


class RequestContextInterceptor(grpc.aio.ServerInterceptor):
    """`observe(method, code, seconds)` (the metrics) sees every RPC this logs."""

    def __init__(self, observe: Callable[[str, str, float], None] | None = None):
        self._observe = observe

    def _finished(self, method: str, context: grpc.aio.ServicerContext, started: float) -> None:
        seconds = time.perf_counter() - started
        code = context.code()
        name = code.name if isinstance(code, grpc.StatusCode) else "OK" if code in (None, 0) else str(code)
        log.info("rpc", extra={"method": method, "code": name, "duration_ms": round(seconds * 1000, 3)})
        if self._observe is not None:
            self._observe(method, name, seconds)

    async def intercept_service(self, continuation, details: grpc.HandlerCallDetails):
        handler = await continuation(details)
        if handler is None or _is_exempt(details.method):
            return handler
        method = details.method
        incoming = _metadata(details, "x-request-id")
        rid = incoming if incoming and len(incoming) <= 128 else uuid.uuid4().hex

        def unary(behavior: UnaryBehavior) -> UnaryBehavior:
            async def run(request, context):
                request_id_var.set(rid)
                started = time.perf_counter()
                try:
                    return await behavior(request, context)
                finally:
                    self._finished(method, context, started)
            return run

        def stream(behavior: StreamBehavior) -> StreamBehavior:
            async def run(request, context):
                request_id_var.set(rid)
                started = time.perf_counter()
                try:
                    async for item in behavior(request, context):
                        yield item
                finally:
                    self._finished(method, context, started)
            return run

        return _wrap(handler, unary, stream)


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Requires `authorization: Bearer <token>` with one of the configured tokens."""

    def __init__(self, tokens: tuple[str, ...]):
        # Digests have one length, so the comparison time says nothing about token lengths.
        self._tokens = [hashlib.sha256(t.encode("utf-8")).digest() for t in tokens]

    def _accepts(self, header: str | None) -> bool:
        if not header or not header[:7].lower() == "bearer ":
            return False
        given = hashlib.sha256(header[7:].strip().encode("utf-8")).digest()
        # Compare with every token so timing reveals neither a match's position nor its
        # existence.
        matched = False
        for token in self._tokens:
            matched |= hmac.compare_digest(given, token)
        return matched

    async def intercept_service(self, continuation, details: grpc.HandlerCallDetails):
        if _is_exempt(details.method) or self._accepts(_metadata(details, "authorization")):
            return await continuation(details)
        handler = await continuation(details)
        if handler is None:
            return None
        refusal = UnauthenticatedError("missing or invalid bearer token")

        def unary(_behavior: UnaryBehavior) -> UnaryBehavior:
            async def deny(request, context):
                await abort(context, refusal, details.method)
            return deny

        def stream(_behavior: StreamBehavior) -> StreamBehavior:
            async def deny(request, context):
                await abort(context, refusal, details.method)
                yield  # pragma: no cover - makes this an async generator; abort raises
            return deny

        return _wrap(handler, unary, stream)


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(self, continuation, details: grpc.HandlerCallDetails):
        handler = await continuation(details)
        if handler is None or _is_exempt(details.method):
            return handler
        method = details.method

        def unary(behavior: UnaryBehavior) -> UnaryBehavior:
            async def run(request, context):
                try:
                    return await behavior(request, context)
                except (grpc.aio.AbortError, GeneratorExit):
                    raise
                except Exception as exc:
                    await abort(context, exc, method)
            return run

        def stream(behavior: StreamBehavior) -> StreamBehavior:
            async def run(request, context):
                try:
                    async for item in behavior(request, context):
                        yield item
                except (grpc.aio.AbortError, GeneratorExit):
                    raise
                except Exception as exc:
                    await abort(context, exc, method)
            return run

        return _wrap(handler, unary, stream)
