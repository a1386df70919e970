"""The caller's memories as MCP resources: read-only, listed a page at a time, each at
`memsvc://memories/{id}`.

They reach exactly what the caller's token reaches, because the server decides: the list is
ListMemories without an apiKeyId, which the server confines to the token's tenants (every
tenant for an admin token, or when the server needs no token), and a read is GetMemory, which
answers NOT_FOUND for a memory of a tenant the token does not cover, as for a missing id.
Nothing here filters. A memory's resource is its REST JSON (application/json), as memory_get
returns it. Writing stays with the tools.

The list is newest first (ListMemories' order). Its cursor is an opaque position in that
list: a memory added or deleted between two pages shifts what the next page starts with
(one may be listed twice or not at all), as with memory_list's offset.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import quote

from google.protobuf import timestamp_pb2
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, Annotations, ListResourcesResult, PaginatedRequestParams, Resource

from memsvc.mcp.caller import Credential
from memsvc.mcp.errors import protocol_error
from memsvc.mcp.upstream import Upstream, rest_json
from memsvc.v1 import memory_pb2

URI_TEMPLATE = "memsvc://memories/{id}"
PAGE_SIZE = 50
MIME_TYPE = "application/json"
TITLE_CHARS = 80


def memory_uri(memory_id: str) -> str:
    return URI_TEMPLATE.replace("{id}", quote(memory_id, safe=""))


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: Any) -> int:
    """The offset a cursor of `encode_cursor` stands for; anything else is refused."""
    try:
        text = str(cursor)
        value = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        offset = value["offset"]
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError):
        offset = None
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise MCPError(code=INVALID_PARAMS, message="invalid argument: cursor: is not a cursor this server returned")
    return offset


def _time(ts: timestamp_pb2.Timestamp) -> str | None:
    return ts.ToJsonString() if ts.seconds or ts.nanos else None


def as_resource(memory: memory_pb2.Memory) -> Resource:
    """One listed memory: named by its key (or id), titled by the start of its content."""
    content = " ".join(memory.content.split())
    title = content if len(content) <= TITLE_CHARS else content[: TITLE_CHARS - 1] + "…"
    created = _time(memory.created_at)
    return Resource(
        uri=memory_uri(memory.id),
        name=memory.key if memory.HasField("key") and memory.key else memory.id,
        title=title,
        description=f"{memory.type} memory of {memory.api_key_id}" + (f", stored {created}" if created else ""),
        mime_type=MIME_TYPE,
        annotations=Annotations(last_modified=_time(memory.updated_at) or created),
    )


class MemoryResources:
    """Lists the caller's memories (`resources/list`) and reads one (`memsvc://memories/{id}`)."""

    def __init__(self, upstream: Upstream, credential: Credential):
        self._upstream = upstream
        self._credential = credential

    async def list_page(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams
    ) -> ListResourcesResult:
        """One page of the caller's memories, newest first, with the cursor of the next."""
        offset = decode_cursor(params.cursor) if params.cursor is not None else 0
        request = memory_pb2.ListMemoriesRequest(limit=PAGE_SIZE, offset=offset)
        try:
            page = await self._upstream.call(self._upstream.memory.ListMemories, request, self._credential(ctx))
        except ToolError as err:
            raise protocol_error(err) from None
        end = offset + len(page.data)
        return ListResourcesResult(
            resources=[as_resource(memory) for memory in page.data],
            next_cursor=encode_cursor(end) if page.data and end < page.total else None,
        )

    async def read(self, id: str, ctx: Context) -> str:
        """The memory `id` (the template's variable) of the caller's: its REST JSON (id,
        apiKeyId, type, key, content, metadata, createdAt, updatedAt, ...), as memory_get
        returns it."""
        request = memory_pb2.GetMemoryRequest(id=id)
        try:
            memory = await self._upstream.call(
                self._upstream.memory.GetMemory, request, self._credential(ctx.request_context)
            )
        except ToolError as err:
            raise protocol_error(err) from None
        return rest_json(memory)

    def register(self, server: MCPServer) -> None:
        """Serves both on `server`: the read as a resource template; the list as the handler
        of `resources/list`, since MCPServer's own lists only fixed resources. It is
        registered on the low-level server as the SDK registers its own handlers, so the
        request is validated and the result shaped for the client's protocol version alike."""
        server.resource(
            URI_TEMPLATE,
            name="memory",
            title="A memory",
            description="One of your memories, by id, as JSON: the resources list gives the ids.",
            mime_type=MIME_TYPE,
        )(self.read)
        server._lowlevel_server.add_request_handler("resources/list", PaginatedRequestParams, self.list_page)
