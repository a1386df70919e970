"""Who an MCP request is from, as the gRPC server sees it: the `authorization` value to
forward, and the tenant a request means when it names none.

The MCP side adds no access rule: which tenants a token may touch is decided by the server
on every RPC. It only fills in the default tenant, and only when the server says the token
addresses exactly one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError

from memsvc.core.credentials import ALL_TENANTS
from memsvc.mcp.errors import UNAUTHENTICATED_HINT
from memsvc.mcp.upstream import Upstream
from memsvc.v1 import credentials_pb2

# The value of the `authorization` metadata to forward for the caller of one request.
Credential = Callable[[ServerRequestContext[Any, Any]], str | None]


def header_authorization(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The `Authorization` header of the HTTP request carrying this MCP request."""
    headers = getattr(ctx.request, "headers", None)
    return headers.get("authorization") if headers is not None else None


async def default_tenant(upstream: Upstream, authorization: str | None, api_key_id: str | None) -> str:
    """The named tenant, else the token's only one, as the server reports the caller's
    credential. A token that may address several tenants (or every one) must name it:
    guessing would put memories where the agent did not mean them."""
    if api_key_id:
        return api_key_id
    caller = await upstream.call(upstream.credentials.GetCaller, credentials_pb2.GetCallerRequest(), authorization)
    if caller.auth_required and not caller.credential.id:  # no token sent, and one is needed
        raise ToolError(f"not authorized: {UNAUTHENTICATED_HINT}")
    tenants = list(caller.credential.tenants)
    if len(tenants) == 1 and tenants[0] != ALL_TENANTS:
        return tenants[0]
    if not tenants:
        reach = "no tenant"
    elif ALL_TENANTS in tenants or not caller.auth_required:
        reach = "every tenant"
    else:
        reach = f"{len(tenants)} tenants ({', '.join(tenants[:5])}{', ...' if len(tenants) > 5 else ''})"
    raise ToolError(f"invalid argument: apiKeyId: is required, since this token may address {reach}")
