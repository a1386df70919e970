"""A failed RPC as the one line an agent reads in its tool result.

The server's status already says what went wrong (and, for bad input, which field and
why, as google.rpc.BadRequest field violations); this keeps that and drops the rest, so an
agent gets a message it can act on and never a stack trace.
"""

from __future__ import annotations

from typing import cast

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS

_PREFIX = {
    grpc.StatusCode.INVALID_ARGUMENT: "invalid argument",
    grpc.StatusCode.NOT_FOUND: "not found",
    grpc.StatusCode.PERMISSION_DENIED: "permission denied",
    grpc.StatusCode.UNAUTHENTICATED: "not authorized",
    grpc.StatusCode.ABORTED: "conflict",
    grpc.StatusCode.FAILED_PRECONDITION: "not possible now",
}
UNAUTHENTICATED_HINT = "the memsvc server refused the bearer token (missing, wrong or revoked)"


def field_violations(err: grpc.RpcError) -> list[str]:
    """`field: description` for each violation the server attached."""
    status = rpc_status.from_call(cast(grpc.Call, err))  # a failed call's RpcError is also its grpc.Call
    out: list[str] = []
    for detail in status.details if status else []:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out.extend(f"{v.field}: {v.description}" if v.field else v.description for v in bad.field_violations)
    return out


def describe(err: grpc.RpcError, address: str) -> str:
    """The message of the tool error that stands for `err`."""
    code = err.code()
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return f"not authorized: {UNAUTHENTICATED_HINT}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return f"memsvc is unavailable at {address} ({code.name}: {err.details()}); try again later"
    violations = field_violations(err) if code is grpc.StatusCode.INVALID_ARGUMENT else []
    if violations:
        return f"invalid argument: {'; '.join(violations)}"
    prefix, details = _PREFIX.get(code, code.name), err.details() or ""
    return details if details.lower().startswith(prefix) or details.lower().endswith(prefix) else f"{prefix}: {details}"


class RpcFailure(ToolError):
    """A failed RPC as a tool error, keeping the status it came from."""

    def __init__(self, message: str, code: grpc.StatusCode):
        super().__init__(message)
        self.code = code


def tool_error(err: grpc.RpcError, address: str) -> RpcFailure:
    return RpcFailure(describe(err, address), err.code())


# What the caller can fix by asking differently: the request, not the server or the token.
_CALLERS_TO_FIX = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED)


def protocol_error(err: ToolError) -> MCPError:
    """The JSON-RPC error for a failure outside a tool call (reading a resource, getting a
    prompt), where there is no tool result to carry it: INVALID_PARAMS when the request is
    what is wrong (a bad argument or cursor, an id not found, a tenant the token may not
    address), INTERNAL_ERROR otherwise (a refused token, memsvc unavailable); the message is
    the one the tool error would carry."""
    fixable = not isinstance(err, RpcFailure) or err.code in _CALLERS_TO_FIX
    return MCPError(code=INVALID_PARAMS if fixable else INTERNAL_ERROR, message=str(err))
