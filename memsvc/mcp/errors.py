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


def tool_error(err: grpc.RpcError, address: str) -> ToolError:
    return ToolError(describe(err, address))
