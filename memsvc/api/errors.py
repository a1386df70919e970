"""The single place where exceptions become gRPC statuses.

Every domain exception maps to a status code and `google.rpc.Status` details (ErrorInfo with
a stable reason, BadRequest with field violations); Envoy turns those into the HTTP status
and the `{"code", "message", "details"}` JSON body. Anything unexpected is INTERNAL
with a sanitized message: the stack goes to the log, never to the client.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, NoReturn

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from memsvc.kernel import errors as core
from memsvc.logs import request_id_var

if TYPE_CHECKING:
    from memsvc.api.grpc_types import Context

log = logging.getLogger("memsvc.api")
DOMAIN = "memsvc"
# Status messages and details travel in HTTP/2 trailers (about 8 KiB in all by default; the
# message is percent-encoded, so a non-ASCII byte costs three): anything that echoes user
# input is cut, in UTF-8 bytes, so the real status always reaches the client.
MAX_MESSAGE = 768
MAX_DETAIL = 256
MAX_DETAILS_BYTES = 3072


def _cut(text: str, limit: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[: limit - 3].decode("utf-8", "ignore") + "…"


class UnauthenticatedError(core.MemsvcError):
    reason = "UNAUTHENTICATED"


_CODES: list[tuple[type[BaseException], grpc.StatusCode]] = [
    (core.ValidationError, grpc.StatusCode.INVALID_ARGUMENT),
    (core.NotFoundError, grpc.StatusCode.NOT_FOUND),
    (core.ConflictError, grpc.StatusCode.ABORTED),
    (core.PreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
    (core.StorageVersionError, grpc.StatusCode.FAILED_PRECONDITION),
    (core.PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (core.UnavailableError, grpc.StatusCode.UNAVAILABLE),
    # A full disk is not a bug: the write was refused whole, and succeeds once space is freed.
    (core.StorageFullError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    # INTERNAL with the core's own message (what failed, what was rolled back).
    (core.OperationFailedError, grpc.StatusCode.INTERNAL),
    (UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
]


def _pack(message: Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def status_for(exc: BaseException) -> grpc.Status:
    """The status (code, message, details trailer) a client receives for `exc`."""
    return rpc_status.to_status(status_proto(exc))


def status_proto(exc: BaseException) -> status_pb2.Status:
    """`exc` as the `google.rpc.Status` message a client receives: in the trailers of a
    failed call, or as one item's `error` in a batch answer (the same code, message and
    details as that item alone would have got)."""
    exc = core.storage_full(exc) or exc  # "no space left" from any file write, too
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return _domain_status(exc, code)  # type: ignore[arg-type]
    rid = request_id_var.get() or "-"
    message = f"internal error (request id {rid})"
    return status_pb2.Status(
        code=code_pb2.INTERNAL,
        message=message,
        details=[_pack(error_details_pb2.ErrorInfo(reason="INTERNAL", domain=DOMAIN))],
    )


def item_status(exc: BaseException, method: str) -> status_pb2.Status:
    """One failed item of a batch call: logged as a failed call would be (a bug with its
    stack), then its status for the batch answer."""
    proto = status_proto(exc)
    if proto.code == code_pb2.INTERNAL:
        log.error("rpc.item_internal_error", exc_info=exc, extra={"method": method})
    return proto


def _domain_status(exc: core.MemsvcError, code: grpc.StatusCode) -> status_pb2.Status:
    details = []
    if exc.reason:
        metadata = {_cut(k, 64): _cut(v, MAX_DETAIL) for k, v in exc.metadata.items()}
        details.append(_pack(error_details_pb2.ErrorInfo(reason=exc.reason, domain=DOMAIN, metadata=metadata)))
    violations = [
        error_details_pb2.BadRequest.FieldViolation(
            field=_cut(v.field, 128), description=_cut(v.description, MAX_DETAIL)
        )
        for v in getattr(exc, "violations", [])
    ]
    while True:
        bad = [_pack(error_details_pb2.BadRequest(field_violations=violations))] if violations else []
        proto = status_pb2.Status(code=code.value[0], message=_cut(exc.message, MAX_MESSAGE), details=details + bad)
        if proto.ByteSize() <= MAX_DETAILS_BYTES or not violations:
            return proto
        violations.pop()  # keep the first violations; the message still names them all


async def abort(context: Context, exc: BaseException, method: str) -> NoReturn:
    """Log as the failure deserves, then end the RPC with the mapped status (raises)."""
    status = status_for(exc)
    if status.code is grpc.StatusCode.INTERNAL:
        log.error("rpc.internal_error", exc_info=exc, extra={"method": method})
    elif core.storage_full(exc) is not None:
        log.warning("rpc.storage_full", extra={"method": method})  # the operator must free space; no stack
    trailing = tuple(status.trailing_metadata) + _request_id_metadata()
    await context.abort(status.code, status.details, trailing_metadata=trailing)


def _request_id_metadata() -> tuple[tuple[str, str], ...]:
    rid = request_id_var.get()
    return (("x-request-id", rid),) if rid else ()
