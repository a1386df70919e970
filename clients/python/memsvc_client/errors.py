"""Typed errors: every failed call raises a `MemsvcError` subclass chosen by the gRPC status code.

memsvc answers each refusal with a `google.rpc.Status` in the `grpc-status-details-bin`
trailer: an `ErrorInfo` whose `reason` is a stable machine-readable code (`REINDEX_RUNNING`,
`STORAGE_FULL`, `PERMISSION_DENIED`, ...) and, for bad input, a `BadRequest` listing every
field that was refused. The message is English for people; the reason is what code should
switch on, so both are kept on the exception.

    try:
        client.memories.get(memory_id)
    except NotFound:
        ...
    except MemsvcError as err:
        log.warning("memsvc refused: %s (%s)", err.message, err.reason)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

__all__ = [
    "Aborted",
    "AlreadyExists",
    "Cancelled",
    "Conflict",
    "DeadlineExceeded",
    "FailedPrecondition",
    "FieldViolation",
    "Internal",
    "InvalidArgument",
    "MemsvcError",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
]

# The trailer memsvc echoes the request id in (also in the server's log lines).
_REQUEST_ID = "x-request-id"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One refused request field (`google.rpc.BadRequest.FieldViolation`), named as the
    server's API names it (camelCase, e.g. `content`, `items[2].content`)."""

    field: str
    description: str


class MemsvcError(Exception):
    """A call memsvc (or the network between) ended with a non-OK status.

    Attributes:
        code: the gRPC status code.
        message: the server's message (for people; English).
        reason: `ErrorInfo.reason` when the server sent one (for code), else None.
        domain: `ErrorInfo.domain` ("memsvc" for the server's own errors), else None.
        metadata: `ErrorInfo.metadata` (e.g. the current snapshot tokens of a conflict).
        field_violations: the `BadRequest` field violations, in the server's order.
        request_id: the `x-request-id` trailer, to find the call in the server's log.
        status: the whole `google.rpc.Status`, or None when the call carried none (a
            transport failure: the server was never reached).
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode | None = None,
        reason: str | None = None,
        domain: str | None = None,
        metadata: Mapping[str, str] | None = None,
        field_violations: tuple[FieldViolation, ...] = (),
        request_id: str | None = None,
        status: status_pb2.Status | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.reason = reason
        self.domain = domain
        self.metadata: Mapping[str, str] = dict(metadata or {})
        self.field_violations = field_violations
        self.request_id = request_id
        self.status = status

    def __str__(self) -> str:
        text = f"{self.code.name}: {self.message}"
        return f"{text} [{self.reason}]" if self.reason else text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code.name}, reason={self.reason!r})"


class InvalidArgument(MemsvcError):
    """Bad input (HTTP 400): nothing was changed. `field_violations` lists every refused field."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(MemsvcError):
    """No such memory (HTTP 404). Another tenant's memory is reported exactly like a missing one."""

    code = grpc.StatusCode.NOT_FOUND


class Conflict(MemsvcError):
    """The request does not fit the current state (HTTP 409); `reason` says which conflict."""


class Aborted(Conflict):
    """memsvc's conflicts: `REINDEX_RUNNING`, `RECENT_FILE_CONFLICT`, `STORAGE_READ_ONLY`, ..."""

    code = grpc.StatusCode.ABORTED


class AlreadyExists(Conflict):
    """The thing to create exists already."""

    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(MemsvcError):
    """The server is not in a state where this can run (no embedding source for a reindex,
    Qdrant disabled, a database written by a newer memsvc)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(MemsvcError):
    """The token may not do this: another tenant's apiKeyId, a missing permission, or a
    request that reaches every tenant without the admin permission."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(MemsvcError):
    """The server needs a bearer token and got none, or one it does not know (or revoked)."""

    code = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhausted(MemsvcError):
    """The server's storage is full (`STORAGE_FULL`: the write was refused whole and succeeds
    once space is freed), or a message was larger than the channel allows."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(MemsvcError):
    """memsvc could not be reached (or a dependency of it is down). Idempotent calls were
    already retried by the channel before this was raised; retrying a write is the caller's
    decision, since the first attempt may have been applied."""

    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(MemsvcError):
    """The call's deadline passed before the answer came. The server may still finish the
    work (a write may be stored); it only stopped waiting on the client side."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(MemsvcError):
    """The call was cancelled on the client side (e.g. a progress stream that was closed)."""

    code = grpc.StatusCode.CANCELLED


class Internal(MemsvcError):
    """A server bug (the message carries the request id to find it in the server's log)."""

    code = grpc.StatusCode.INTERNAL


_BY_CODE: dict[grpc.StatusCode, type[MemsvcError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        Aborted,
        AlreadyExists,
        FailedPrecondition,
        PermissionDenied,
        Unauthenticated,
        ResourceExhausted,
        Unavailable,
        DeadlineExceeded,
        Cancelled,
        Internal,
    )
}


def error_class(code: grpc.StatusCode) -> type[MemsvcError]:
    """The exception class raised for `code` (MemsvcError itself for codes memsvc does not use)."""
    return _BY_CODE.get(code, MemsvcError)


def from_rpc_error(err: grpc.RpcError) -> MemsvcError:
    """The typed error for a failed call (sync `grpc.RpcError` or `grpc.aio.AioRpcError`)."""
    code = _call_code(err)
    message = _call_details(err)
    status = _rich_status(err)
    return from_status(code, message, status, _request_id(err))


def from_status(
    code: grpc.StatusCode, message: str, status: status_pb2.Status | None, request_id: str | None = None
) -> MemsvcError:
    """The typed error for a status: a failed call's, or one refused item of a batch
    (`CreateMemoryResult.error`, which carries the same details the call alone would have)."""
    reason: str | None = None
    domain: str | None = None
    metadata: dict[str, str] = {}
    violations: list[FieldViolation] = []
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason, domain, metadata = info.reason or None, info.domain or None, dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
    return error_class(code)(
        message,
        code=code,
        reason=reason,
        domain=domain,
        metadata=metadata,
        field_violations=tuple(violations),
        request_id=request_id,
        status=status,
    )


def status_code(value: int) -> grpc.StatusCode:
    """The grpc.StatusCode of a numeric `google.rpc.Code` (UNKNOWN for a number gRPC lacks)."""
    for code in grpc.StatusCode:
        if code.value[0] == value:
            return code
    return grpc.StatusCode.UNKNOWN


def _call_code(err: grpc.RpcError) -> grpc.StatusCode:
    code = getattr(err, "code", None)
    value = code() if callable(code) else None
    return value if isinstance(value, grpc.StatusCode) else grpc.StatusCode.UNKNOWN


def _call_details(err: grpc.RpcError) -> str:
    details = getattr(err, "details", None)
    value = details() if callable(details) else None
    return value if isinstance(value, str) else str(err)


def _trailers(err: grpc.RpcError) -> list[tuple[str, Any]]:
    trailing = getattr(err, "trailing_metadata", None)
    value = trailing() if callable(trailing) else None
    return list(value or ())


def _rich_status(err: grpc.RpcError) -> status_pb2.Status | None:
    """The `google.rpc.Status` trailer, or None when absent or inconsistent with the call's
    own code and message (then the call's code and message are what is true)."""
    try:
        return rpc_status.from_call(err)  # type: ignore[arg-type]  # an RpcError here is also a grpc.Call
    except ValueError:
        return None


def _request_id(err: grpc.RpcError) -> str | None:
    for key, value in _trailers(err):
        if key == _REQUEST_ID:
            return value if isinstance(value, str) else bytes(value).decode("ascii", "replace")
    return None
