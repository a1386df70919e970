"""Per-request concerns, as grpc.aio interceptors, outermost first:

1. RequestContextInterceptor: request id (from `x-request-id`, which Envoy sets, or new),
   one structured log line per RPC with its status and duration.
2. AuthInterceptor: bearer tokens (configured, or stored credentials), then the access rule
   table of `memsvc.api.access`; health and reflection exempt.
3. ErrorInterceptor: domain exceptions → status + details via `memsvc.api.errors`, so the
   servicers stay one-liners and no method maps errors by hand.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, cast

import grpc

from memsvc.api.access import Grant, admits_anonymous, authorize, check_owner, requested_tenant
from memsvc.api.blocking import run
from memsvc.api.decoding import is_undecodable
from memsvc.api.errors import UnauthenticatedError, abort, status_for
from memsvc.api.oauth import TokenRefused, Verifier, bearer_token, looks_like_jwt
from memsvc.core.credentials import ANONYMOUS, Credential, Verdict, admin_credential, caller, tenant_scope
from memsvc.kernel.changes import set_author
from memsvc.kernel.errors import MemsvcError, PermissionDeniedError
from memsvc.logs import request_id_var

if TYPE_CHECKING:
    from memsvc.api.grpc_types import Context, Continuation, Handler, StreamBehavior, UnaryBehavior

log = logging.getLogger("memsvc.rpc")
audit_log = logging.getLogger("memsvc.audit")

#: How often a response stream's token is checked again while it runs (between messages; a
#: quiet change feed sends a bookmark every MEMSVC_WATCH_HEARTBEAT_S).
STREAM_RECHECK_S = 5.0
EXEMPT_PREFIXES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)


def _wrap(
    handler: Handler,
    unary: Callable[[UnaryBehavior], UnaryBehavior],
    stream: Callable[[StreamBehavior], StreamBehavior],
) -> Handler:
    """Rebuild a method handler with its behaviour wrapped; memsvc has only unary-unary and
    unary-stream methods (client streaming is passed through untouched)."""
    if handler.request_streaming:
        return handler
    # types-grpcio types a handler's behaviours for the synchronous server; under grpc.aio
    # they are coroutine (async generator) functions taking an aio ServicerContext.
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(
            stream(cast("StreamBehavior", handler.unary_stream)),
            handler.request_deserializer,
            handler.response_serializer,
        )
    return grpc.unary_unary_rpc_method_handler(
        unary(cast("UnaryBehavior", handler.unary_unary)), handler.request_deserializer, handler.response_serializer
    )


def _metadata(details: grpc.HandlerCallDetails, key: str) -> str | None:
    for k, v in details.invocation_metadata or ():
        if k == key:
            return v if isinstance(v, str) else v.decode("utf-8", "replace")
    return None


def _request_id(incoming: str | None) -> str:
    """The caller's request id when gRPC can send it back (it is echoed in the x-request-id
    trailer, and a metadata value must be printable ASCII: anything else fails the call with
    INTERNAL after it ran), at most 128 characters; otherwise a new one."""
    if incoming and len(incoming) <= 128 and incoming.isascii() and incoming.isprintable():
        return incoming
    return uuid.uuid4().hex


def _is_exempt(method: str) -> bool:
    return method.startswith(EXEMPT_PREFIXES)


class RequestContextInterceptor(grpc.aio.ServerInterceptor):
    """`observe(method, code, seconds)` (the metrics) sees every RPC this logs."""

    def __init__(self, observe: Callable[[str, str, float], None] | None = None):
        self._observe = observe

    def _finished(self, method: str, context: Context, started: float) -> None:
        seconds = time.perf_counter() - started
        code = context.code()
        name = code.name if isinstance(code, grpc.StatusCode) else "OK" if code in (None, 0) else str(code)
        log.info("rpc", extra={"method": method, "code": name, "duration_ms": round(seconds * 1000, 3)})
        if self._observe is not None:
            self._observe(method, name, seconds)

    async def intercept_service(self, continuation: Continuation, details: grpc.HandlerCallDetails) -> Handler | None:
        handler = await continuation(details)
        if handler is None or _is_exempt(details.method):
            return handler
        method = details.method
        incoming = _metadata(details, "x-request-id")
        rid = _request_id(incoming)

        def unary(behavior: UnaryBehavior) -> UnaryBehavior:
            async def run(request: Any, context: Context) -> Any:
                request_id_var.set(rid)
                started = time.perf_counter()
                try:
                    return await behavior(request, context)
                finally:
                    self._finished(method, context, started)

            return run

        def stream(behavior: StreamBehavior) -> StreamBehavior:
            async def run(request: Any, context: Context) -> AsyncIterator[Any]:
                request_id_var.set(rid)
                started = time.perf_counter()
                try:
                    async for item in behavior(request, context):
                        yield item
                finally:
                    self._finished(method, context, started)

            return run

        return _wrap(handler, unary, stream)


class Authenticator(Protocol):
    """Token verification against the stored credentials (memsvc.core.credentials)."""

    def check_now(self, token: str | None) -> Verdict | None: ...

    def check(self, token: str | None) -> Verdict: ...


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates `authorization: Bearer <token>`, then authorizes the call by the rule
    table (memsvc.api.access) and passes the caller's tenant confinement down.

    A MEMSVC_API_TOKENS token is an admin (id `env:N`, its position in the list); any other
    token is checked against the stored credentials, whose cache is trusted only under the
    store's change counter, so a revocation holds from the next request. The check answers
    on the event loop only from memory (`check_now`); whatever has to read the store runs on
    a worker thread. With no configured token and no stored credential, authentication is
    off (the server then binds to loopback only); the first credential created turns it on,
    in every process, without a restart.

    With an OAuth issuer configured (`oauth`), authentication is always on, and a token that
    is a JWT is an access token of that issuer (memsvc.api.oauth), verified on a worker
    thread into a Credential that the same rule table then judges; a refused one is
    UNAUTHENTICATED with the reason, audited.
    """

    def __init__(
        self,
        tokens: tuple[str, ...],
        credentials: Authenticator | None = None,
        owner_of: Callable[[str], str | None] | None = None,
        oauth: Verifier | None = None,
    ):
        # Digests have one length, so the comparison time says nothing about token lengths.
        self._tokens = [hashlib.sha256(t.encode("utf-8")).digest() for t in tokens]
        self._credentials = credentials
        self._owner_of = owner_of
        self._oauth = oauth

    def _configured(self, token: str) -> Credential | None:
        given = hashlib.sha256(token.encode("utf-8")).digest()
        # Compare with every token so timing reveals neither a match's position nor its
        # existence.
        matched = 0
        for position, configured in enumerate(self._tokens, start=1):
            if hmac.compare_digest(given, configured):
                matched = matched or position
        return admin_credential(f"env:{matched}") if matched else None

    async def _verify(self, header: str | None) -> tuple[bool, Credential | None, str | None]:
        """(whether the call needs a token, the credential its header proves, why a JWT
        access token was refused)."""
        token = bearer_token(header)
        found = self._configured(token) if token is not None and self._tokens else None
        required = bool(self._tokens) or self._oauth is not None
        if found is not None:
            return True, found, None
        if token is not None and self._oauth is not None and looks_like_jwt(token):
            try:
                return True, await run(self._oauth.verify, token), None
            except TokenRefused as exc:
                return True, None, str(exc)
        if self._credentials is None or (token is None and required):
            return required, None, None
        verdict = self._credentials.check_now(token)
        if verdict is None:
            verdict = await run(self._credentials.check, token)
        return required or verdict.required, verdict.credential, None

    async def _admit(
        self, method: str, credential: Credential | None, request: Any, context: Context, refused: str | None = None
    ) -> Grant:
        """The grant for this call, or the call is ended (audited) with the refusal
        (`refused`: why a JWT access token proved nothing)."""
        tenant = requested_tenant(method, request)
        try:
            if credential is None and refused is not None:
                raise UnauthenticatedError(f"invalid access token: {refused}")
            if credential is None:
                raise UnauthenticatedError("missing or invalid bearer token")
            if is_undecodable(request):  # an authenticated caller's malformed request is a 400
                raise request.error
            grant = authorize(method, credential, request)
            if grant.memory_id is not None:
                owner = await run(self._owner_of, grant.memory_id) if self._owner_of else None
                tenant = owner or ""
                check_owner(credential, grant.memory_id, owner)
                grant = replace(grant, tenant=tenant)
            return grant
        except MemsvcError as exc:
            _audit(credential, method, tenant, status_for(exc).code, refused)
            await abort(context, exc, method)
            raise  # pragma: no cover - abort raises

    async def _still_valid(
        self, method: str, header: str | None, credential: Credential | None, context: Context
    ) -> None:
        """A stream outlives the check of its start (a change feed is followed for hours): its
        token is checked again as it goes on, and a credential revoked or an access token
        expired since ends it, UNAUTHENTICATED and audited, as the next call would be."""
        if credential is None or credential is ANONYMOUS:
            return
        _, again, refused = await self._verify(header)
        if again is not None:
            return
        reason = f"invalid access token: {refused}" if refused else "the token was revoked while the stream ran"
        exc = UnauthenticatedError(reason)
        _audit(credential, method, "", status_for(exc).code, refused)
        await abort(context, exc, method)

    def _refusing(
        self, handler: Handler, method: str, credential: Credential | None, refused: str | None = None
    ) -> Handler:
        """A method taking a stream of requests: the rule table checks one request per call,
        so such a call is refused (fail closed) instead of running unchecked; a missing or
        wrong token is still told as such."""

        async def refuse(requests: AsyncIterator[Any], context: Context) -> None:
            await self._admit(method, credential, None, context, refused)
            exc = PermissionDeniedError("a method taking a stream of requests has no access check")
            _audit(credential, method, "", status_for(exc).code)
            await abort(context, exc, method)

        build = (
            grpc.stream_stream_rpc_method_handler
            if handler.response_streaming
            else grpc.stream_unary_rpc_method_handler
        )
        return build(refuse, handler.request_deserializer, handler.response_serializer)

    async def intercept_service(self, continuation: Continuation, details: grpc.HandlerCallDetails) -> Handler | None:
        handler = await continuation(details)
        if handler is None or _is_exempt(details.method):
            return handler
        method = details.method
        header = _metadata(details, "authorization")
        try:
            enabled, credential, refused = await self._verify(header)
        except MemsvcError as exc:  # the credential store is unreachable (a shared database restarting)
            return _failing(handler, method, exc)
        if not enabled:
            return handler
        if credential is None and header is None and admits_anonymous(method):
            credential = ANONYMOUS
        if handler.request_streaming:
            return self._refusing(handler, method, credential, refused)

        @contextlib.asynccontextmanager
        async def admitted(request: Any, context: Context) -> AsyncIterator[None]:
            """The call checked (or ended with its refusal), its confinement and caller set
            for the behaviour, and audited once it ended when its grant says so."""
            grant = await self._admit(method, credential, request, context, refused)
            # Each RPC runs in its own task, so the scope set here ends with the call (as the
            # request id does); the worker threads see it through blocking.run's context copy.
            tenant_scope.set(grant.scope)
            caller.set(credential)
            set_author(credential.id if credential is not None else "")  # the history names who made each change
            try:
                yield
            finally:
                if grant.audited:
                    _audit(credential, method, grant.tenant, context.code())

        def unary(behavior: UnaryBehavior) -> UnaryBehavior:
            async def run_checked(request: Any, context: Context) -> Any:
                async with admitted(request, context):
                    return await behavior(request, context)

            return run_checked

        def stream(behavior: StreamBehavior) -> StreamBehavior:
            async def run_checked(request: Any, context: Context) -> AsyncIterator[Any]:
                async with admitted(request, context):
                    checked = time.monotonic()
                    async for item in behavior(request, context):
                        if time.monotonic() - checked >= STREAM_RECHECK_S:
                            await self._still_valid(method, header, credential, context)
                            checked = time.monotonic()
                        yield item

            return run_checked

        return _wrap(handler, unary, stream)


def _failing(handler: Handler, method: str, exc: MemsvcError) -> Handler:
    """`handler` ending every call with `exc`'s status (UNAVAILABLE when the credentials
    could not be read): an exception raised while choosing the handler would reach the
    client as UNKNOWN, with the exception's text."""

    async def fail(request: Any, context: Context) -> None:
        await abort(context, exc, method)

    async def fail_stream(request: Any, context: Context) -> AsyncIterator[Any]:
        await abort(context, exc, method)
        yield  # pragma: no cover - abort raises

    return _wrap(handler, lambda _: fail, lambda _: fail_stream)


def _audit(credential: Credential | None, method: str, tenant: str, code: Any, refused: str | None = None) -> None:
    """One line per refused or admin call: who, what, on which tenant, how it ended (and,
    for a refused JWT access token, why). Never the token, never request contents beyond
    the apiKeyId."""
    status = code.name if isinstance(code, grpc.StatusCode) else "OK" if code in (None, 0) else str(code)
    extra = {
        "token_id": credential.id if credential else None,
        "method": method,
        "tenant": tenant or None,
        "status": status,
    }
    if refused is not None:
        extra["reason"] = refused
    audit_log.info("audit", extra=extra)


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    """`observe(exc)` (the metrics) sees every exception an RPC fails with."""

    def __init__(self, observe: Callable[[BaseException], None] | None = None):
        self._observe = observe

    async def _fail(self, context: Context, exc: BaseException, method: str) -> None:
        if self._observe is not None:
            self._observe(exc)
        await abort(context, exc, method)

    async def intercept_service(self, continuation: Continuation, details: grpc.HandlerCallDetails) -> Handler | None:
        handler = await continuation(details)
        if handler is None or _is_exempt(details.method):
            return handler
        method = details.method

        def unary(behavior: UnaryBehavior) -> UnaryBehavior:
            async def run(request: Any, context: Context) -> Any:
                try:
                    return await behavior(request, context)
                except (grpc.aio.AbortError, GeneratorExit):
                    raise
                except Exception as exc:
                    await self._fail(context, exc, method)

            return run

        def stream(behavior: StreamBehavior) -> StreamBehavior:
            async def run(request: Any, context: Context) -> AsyncIterator[Any]:
                try:
                    async for item in behavior(request, context):
                        yield item
                except (grpc.aio.AbortError, GeneratorExit):
                    raise
                except Exception as exc:
                    await self._fail(context, exc, method)

            return run

        return _wrap(handler, unary, stream)
