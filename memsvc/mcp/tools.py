"""The memory tools: each is one or two RPCs of memsvc's gRPC API with the caller's token.

The tools add no access rule of their own. Which tenants (`apiKeyId`s) a token may touch,
and what it may do there, is decided by the server on every RPC; a tool only fills in the
default tenant when the caller names none, and turns the server's answer into JSON text
(the same lowerCamelCase fields as the REST API) or into a tool error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from google.protobuf import timestamp_pb2
from google.protobuf.message import Message
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import Field

from memsvc.api.convert import dict_to_struct
from memsvc.kernel.models import MEMORY_TYPES
from memsvc.mcp.arguments import plain_schema
from memsvc.mcp.caller import Credential, default_tenant
from memsvc.mcp.upstream import Upstream, rest_json
from memsvc.v1 import engine_pb2, memory_pb2

MemoryType = Literal[MEMORY_TYPES]  # type: ignore[valid-type]
ApiKeyId = Annotated[
    str | None,
    Field(
        description="The tenant (apiKeyId) whose memories to use. May be left out when the token "
        "addresses exactly one tenant; required when it addresses several."
    ),
]
MemoryId = Annotated[
    str, Field(min_length=1, description="The memory's id, as returned by memory_add, memory_search or memory_list.")
]
TypeFilter = Annotated[MemoryType | None, Field(description="Only memories of this type.")]
Metadata = Annotated[dict[str, Any] | None, Field(description="Free-form JSON object stored with the memory.")]
Keep = Annotated[
    bool | None,
    Field(
        description=(
            "true: keep the memory with no age limit (the memory settings' retentionDays never hide it from "
            "search; for facts such as the user's name); false: let retentionDays apply. Expiry still applies."
        )
    ),
]
OccurredAt = Annotated[
    str | None,
    Field(
        json_schema_extra={"format": "date-time"},
        description=(
            "When what the memory records happened, if not when it is stored (e.g. the time an imported chat "
            "message was said; RFC 3339, e.g. 2023-12-31T18:45:00Z). Leave it out when not known (memory_update: "
            "to leave it as it is)."
        ),
    ),
]


def _floor_note(resolution: engine_pb2.Resolution) -> dict[str, Any]:
    """The relevance floor of a search in words an agent reads before the numbers: an empty
    or short result may mean that nothing stored reached the floor, not that nothing is stored."""
    applied = resolution.keyword_floor > 0 or resolution.vector_floor > 0
    below = resolution.below_min_score
    if not applied:
        note = "no relevance floor applied: every ranked memory is returned"
    else:
        note = (
            f"{below} {'memory' if below == 1 else 'memories'} below the relevance floor left out "
            "(minScore 0 returns them)"
            if below
            else "no memory fell below the relevance floor"
        )
    return {
        "keywordOverlap": resolution.keyword_floor,
        "vectorSimilarity": resolution.vector_floor,
        "belowFloor": below,
        "note": note,
    }


def _timestamp(value: str, name: str) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    try:
        ts.FromJsonString(value)
    except ValueError:
        raise ToolError(f"invalid argument: {name}: must be an RFC 3339 time such as 2026-01-31T00:00:00Z") from None
    return ts


class MemoryTools:
    """The tools bound to one upstream and one way of finding the caller's credential."""

    def __init__(self, upstream: Upstream, credential: Credential):
        self._upstream = upstream
        self._credential = credential

    async def _call(self, ctx: Context, method: Callable[..., Any], request: Message) -> Any:
        return await self._upstream.call(method, request, self._credential(ctx.request_context))

    async def _tenant(self, ctx: Context, api_key_id: str | None) -> str:
        return await default_tenant(self._upstream, self._credential(ctx.request_context), api_key_id)

    async def memory_search(
        self,
        ctx: Context,
        query: Annotated[str, Field(min_length=1, description="What to look for, in natural language.")],
        apiKeyId: ApiKeyId = None,
        type: TypeFilter = None,
        maxTokens: Annotated[
            int | None,
            Field(
                ge=1,
                le=16000,
                description=("Token budget of the memories returned (default from the memory settings)."),
            ),
        ] = None,
        limit: Annotated[
            int | None,
            Field(ge=1, le=100, description=("At most this many memories (default: as many as fit the token budget).")),
        ] = None,
        minScore: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description=(
                    "Relevance floor 0..1: a memory is returned only when its keyword overlap with the query or its "
                    "vector similarity reaches it; 0 returns every ranked memory. Default: the server's floor."
                ),
            ),
        ] = None,
        asOf: Annotated[
            str | None,
            Field(
                json_schema_extra={"format": "date-time"},
                description=(
                    "Search the memories as they were at this time (RFC 3339, e.g. 2026-01-31T00:00:00Z; not in the "
                    "future): a fact replaced later (same key) comes back as it was then, with validTo; memories "
                    "stored after it are left out. Default: the current memories."
                ),
            ),
        ] = None,
    ) -> str:
        """Search the tenant's memories for those relevant to `query`, best first, within a
        token budget. Ranking uses the retrieval strategy of the memory settings (keyword,
        semantic or hybrid); memories below the relevance floor are left out. `type` keeps only
        memories of that type among the ranked results; `asOf` searches the memories as they
        were at that time. Returns {memories: [{id, type, key, content, score, tokens, tier,
        sessionId, occurredAt (when it happened, if known), validFrom, validTo (since and, for
        a fact replaced later, until when it held)}], totalTokens, resolution, relevanceFloor};
        relevanceFloor says which floor applied (keywordOverlap, vectorSimilarity) and how many
        memories fell below it (belowFloor). An empty list means nothing relevant is stored."""
        request = engine_pb2.RetrieveRequest(api_key_id=await self._tenant(ctx, apiKeyId), query=query, scope="apiKey")
        if maxTokens is not None:
            request.max_tokens = maxTokens
        if minScore is not None:
            request.min_score = minScore
        if asOf is not None:
            request.as_of.CopyFrom(_timestamp(asOf, "asOf"))
        if limit is not None and type is None:  # with a type, the limit counts what the filter keeps
            request.limit = limit  # the server returns (and counts as accessed) only these
        response = await self._call(ctx, self._upstream.engine.Retrieve, request)
        kept = [m for m in response.memories if type is None or m.type == type][:limit]
        del response.memories[:]
        response.memories.extend(kept)
        response.total_tokens = sum(m.tokens for m in kept)
        return rest_json(response, relevanceFloor=_floor_note(response.resolution))

    async def memory_add(
        self,
        ctx: Context,
        content: Annotated[
            str, Field(min_length=1, description="The memory itself, one self-contained statement (at most 32 KiB).")
        ],
        type: Annotated[
            MemoryType,
            Field(
                description=(
                    "factual: facts and preferences; episodic: events and decisions; procedural: "
                    "how-tos and habits; semantic: general knowledge and summaries."
                )
            ),
        ],
        key: Annotated[
            str | None,
            Field(
                max_length=512,
                description=(
                    "Stable name of the fact (e.g. 'preferred-language'). Adding again with the same key "
                    "replaces that memory instead of creating a second one."
                ),
            ),
        ] = None,
        sessionId: Annotated[str | None, Field(description="The conversation this memory came from.")] = None,
        apiKeyId: ApiKeyId = None,
        metadata: Metadata = None,
        keep: Keep = None,
        occurredAt: OccurredAt = None,
    ) -> str:
        """Store a memory for the tenant. Returns {success, id, created, mergedInto}; created is
        false when a memory with the same key was updated in place, or when the memory (without
        a key) repeats one the tenant already has: then nothing new is stored and mergedInto
        (also id) names that memory, whose history records the merge (memory_history)."""
        request = memory_pb2.CreateMemoryRequest(
            api_key_id=await self._tenant(ctx, apiKeyId), content=content, type=type, metadata=dict_to_struct(metadata)
        )
        if key is not None:
            request.key = key
        if sessionId is not None:
            request.session_id = sessionId
        if keep is not None:
            request.keep = keep
        if occurredAt is not None:
            request.occurred_at.CopyFrom(_timestamp(occurredAt, "occurredAt"))
        return rest_json(await self._call(ctx, self._upstream.memory.CreateMemory, request))

    async def memory_clear(
        self,
        ctx: Context,
        apiKeyId: ApiKeyId = None,
        type: Annotated[MemoryType | None, Field(description="Only memories of this type.")] = None,
        olderThan: Annotated[
            str | None,
            Field(
                json_schema_extra={"format": "date-time"},
                description=("Only memories created before this time (RFC 3339, e.g. 2026-01-31T00:00:00Z)."),
            ),
        ] = None,
    ) -> str:
        """Delete every memory of the tenant that matches the filters, with its search index
        entries (vectors included). Without filters this deletes ALL the tenant's memories:
        it cannot be undone. Returns {success, deletedCount}."""
        request = memory_pb2.ClearMemoriesRequest(api_key_id=await self._tenant(ctx, apiKeyId), type=type or "")
        if olderThan is not None:
            request.older_than.CopyFrom(_timestamp(olderThan, "olderThan"))
        return rest_json(await self._call(ctx, self._upstream.memory.ClearMemories, request))

    async def memory_list(
        self,
        ctx: Context,
        apiKeyId: ApiKeyId = None,
        type: TypeFilter = None,
        sessionId: Annotated[str | None, Field(description="Only memories of this conversation.")] = None,
        contains: Annotated[
            str | None, Field(description=("Only memories whose content or key contains this text (case-insensitive)."))
        ] = None,
        limit: Annotated[int | None, Field(ge=1, le=200, description="Page size (default 50).")] = None,
        offset: Annotated[int | None, Field(ge=0, description="Memories to skip (default 0).")] = None,
    ) -> str:
        """List the tenant's memories, newest first, a page at a time. Returns {data: [memory],
        total, page, limit, totalPages, stats}; use memory_search to find memories by meaning."""
        request = memory_pb2.ListMemoriesRequest(
            api_key_id=await self._tenant(ctx, apiKeyId), type=type or "", session_id=sessionId or "", q=contains or ""
        )
        if limit is not None:
            request.limit = limit
        if offset is not None:
            request.offset = offset
        return rest_json(await self._call(ctx, self._upstream.memory.ListMemories, request))

    async def memory_get(self, ctx: Context, id: MemoryId) -> str:
        """Read one memory by id: {id, apiKeyId, type, key, content, metadata, createdAt,
        updatedAt, accessCount, occurredAt (when it happened, if known), ...}. A memory the token may not see is reported as not found."""
        return rest_json(await self._call(ctx, self._upstream.memory.GetMemory, memory_pb2.GetMemoryRequest(id=id)))

    async def memory_history(
        self,
        ctx: Context,
        id: MemoryId,
        limit: Annotated[
            int | None, Field(ge=1, le=1000, description="At most this many changes, oldest first (default 100).")
        ] = None,
        pageToken: Annotated[
            str | None, Field(max_length=32, description="nextPageToken of an earlier call: the changes after it.")
        ] = None,
    ) -> str:
        """Every change to one memory, oldest first, and the facts it replaced. Returns {id,
        apiKeyId, entries: [{event, at, author, changes, relatedId}], versions: [memory with
        validFrom, validTo], nextPageToken}. event is created, updated, superseded (a memory_add
        with the same key replaced the content), merged (a repeat was merged into it),
        summarized, deleted or expired; author is the credential that made the change; changes
        holds the fields it set, with their new values. versions are the replaced facts, oldest
        first, each with the time span it held. A deleted memory's history is only its
        deletion. nextPageToken is set when more changes follow: pass it as pageToken for
        them. A memory the token may not see is reported as not found."""
        request = memory_pb2.GetMemoryHistoryRequest(id=id, page_token=pageToken or "")
        if limit is not None:
            request.limit = limit
        return rest_json(await self._call(ctx, self._upstream.memory.GetMemoryHistory, request))

    async def memory_update(
        self,
        ctx: Context,
        id: MemoryId,
        content: Annotated[str | None, Field(min_length=1, description="New text of the memory.")] = None,
        type: Annotated[MemoryType | None, Field(description="New type.")] = None,
        key: Annotated[str | None, Field(max_length=512, description="New key.")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description=("Keys to merge into the memory's metadata."))
        ] = None,
        keep: Keep = None,
        occurredAt: OccurredAt = None,
    ) -> str:
        """Change the content, type, key, metadata, keep and/or occurredAt of one memory; fields
        left out stay as they are. Returns {success, memory}."""
        if all(value is None for value in (content, type, key, metadata, keep, occurredAt)):
            raise ToolError("invalid argument: give at least one of content, type, key, metadata, keep, occurredAt")
        request = memory_pb2.UpdateMemoryRequest(id=id)
        for name, value in (("content", content), ("type", type), ("key", key), ("keep", keep)):
            if value is not None:
                setattr(request, name, value)
        if metadata is not None:
            request.metadata.CopyFrom(dict_to_struct(metadata))
        if occurredAt is not None:
            request.occurred_at.CopyFrom(_timestamp(occurredAt, "occurredAt"))
        return rest_json(await self._call(ctx, self._upstream.memory.UpdateMemory, request))

    async def memory_delete(self, ctx: Context, id: MemoryId) -> str:
        """Delete one memory by id, with its search index entries. Returns {success}."""
        return rest_json(
            await self._call(ctx, self._upstream.memory.DeleteMemory, memory_pb2.DeleteMemoryRequest(id=id))
        )


# The tools in the order `tools/list` gives them, the same on every request and transport
# (a client may cache the list, and a model's prompt cache keys on the tool definitions).
ANNOTATIONS = {
    "memory_search": ToolAnnotations(title="Search memories", read_only_hint=True),
    "memory_list": ToolAnnotations(title="List memories", read_only_hint=True),
    "memory_get": ToolAnnotations(title="Read a memory", read_only_hint=True),
    "memory_history": ToolAnnotations(title="Read a memory's history", read_only_hint=True),
    "memory_add": ToolAnnotations(title="Add a memory", destructive_hint=False, idempotent_hint=False),
    "memory_update": ToolAnnotations(title="Update a memory", destructive_hint=True, idempotent_hint=True),
    "memory_delete": ToolAnnotations(title="Delete a memory", destructive_hint=True, idempotent_hint=True),
    "memory_clear": ToolAnnotations(title="Clear memories", destructive_hint=True, idempotent_hint=True),
}


def memory_tools(upstream: Upstream, credential: Credential) -> list[Tool]:
    """The eight memory tools, in `ANNOTATIONS` order, each publishing a plain JSON schema
    that is also what its arguments are checked against (memsvc.mcp.arguments)."""
    tools = MemoryTools(upstream, credential)
    registered = []
    for name, hints in ANNOTATIONS.items():
        tool = Tool.from_function(getattr(tools, name), name=name, annotations=hints, structured_output=False)
        tool.parameters = plain_schema(tool.parameters)
        registered.append(tool)
    return registered
