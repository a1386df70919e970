"""MCP sessions through the SDK's own client (`mcp.ClientSession`), over stdio (`memsvc mcp`
launched as a subprocess) and streamable HTTP, and the checks both transports share: the
tool listing, one call of every tool, bad arguments and refused tokens as tool errors."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from memsvc.kernel.models import MEMORY_TYPES

BIN = Path(sys.executable).parent
TOOLS = {"memory_search", "memory_add", "memory_clear", "memory_list", "memory_get", "memory_update", "memory_delete"}


@asynccontextmanager
async def stdio_session(grpc_port: int, token: str | None, errlog_path: Path) -> AsyncIterator[ClientSession]:
    """`memsvc mcp` as a desktop agent launches it, with MEMSVC_TOKEN in its environment;
    the SDK ends the process when the session closes."""
    env = {"MEMSVC_TOKEN": token} if token else {}
    params = StdioServerParameters(command=str(BIN / "memsvc"), args=["mcp", "--grpc-port", str(grpc_port)], env=env)
    with errlog_path.open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, name: str, **arguments: Any) -> tuple[bool, str]:
    """(is_error, text) of one tool call."""
    result = await session.call_tool(name, arguments)
    return bool(result.is_error), "".join(getattr(block, "text", "") for block in result.content)


async def ok(session: ClientSession, name: str, **arguments: Any) -> Any:
    """The JSON a successful call returned (fails the test with the tool's message otherwise)."""
    is_error, text = await call(session, name, **arguments)
    assert not is_error, f"{name} failed: {text}"
    return json.loads(text)


async def failure(session: ClientSession, name: str, **arguments: Any) -> str:
    """The message of a call that must fail as a tool error (not a protocol error)."""
    is_error, text = await call(session, name, **arguments)
    assert is_error, f"{name} should have failed, returned {text[:200]}"
    assert "Traceback" not in text
    return text


async def check_listing(session: ClientSession) -> None:
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        schema = tool.input_schema
        assert tool.description and len(tool.description) > 40, tool.name
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert all(prop.get("description") for prop in schema["properties"].values()), tool.name
        assert not any("anyOf" in prop for prop in schema["properties"].values()), tool.name
    add = tools["memory_add"].input_schema
    assert add["properties"]["type"]["enum"] == list(MEMORY_TYPES)
    assert set(add["required"]) == {"content", "type"}
    assert set(tools["memory_search"].input_schema["properties"]) == {
        "query",
        "apiKeyId",
        "type",
        "maxTokens",
        "limit",
        "minScore",
    }
    assert set(tools["memory_clear"].input_schema["properties"]) == {"apiKeyId", "type", "olderThan"}
    assert tools["memory_add"].input_schema["properties"]["keep"]["type"] == "boolean"
    assert {"keep", "occurredAt"} <= set(tools["memory_update"].input_schema["properties"])
    assert tools["memory_search"].annotations.read_only_hint is True
    assert tools["memory_clear"].annotations.destructive_hint is True


async def exercise_every_tool(session: ClientSession, tenant: str) -> None:
    """add → get → list → search → update → delete → clear, each checked by reading back."""
    added = await ok(
        session,
        "memory_add",
        apiKeyId=tenant,
        content="The user prefers dark mode in every editor",
        type="factual",
        key="pref:theme",
        sessionId="s-1",
        metadata={"source": "mcp"},
    )
    other = await ok(
        session,
        "memory_add",
        apiKeyId=tenant,
        content="Deployed the billing service on Friday",
        type="episodic",
        occurredAt="2023-12-29T16:30:00+02:00",
    )
    assert added["created"] is True and added["id"] != other["id"]
    got = await ok(session, "memory_get", id=added["id"])
    assert (got["apiKeyId"], got["type"], got["key"], got["sessionId"]) == (tenant, "factual", "pref:theme", "s-1")
    assert got["metadata"] == {"source": "mcp"} and "occurredAt" not in got  # not known: not shown
    listed = await ok(session, "memory_list", apiKeyId=tenant, type="episodic")
    assert [m["id"] for m in listed["data"]] == [other["id"]] and listed["total"] == 1
    assert listed["data"][0]["occurredAt"] == "2023-12-29T14:30:00Z"
    found = await ok(session, "memory_search", apiKeyId=tenant, query="dark mode editor")
    assert found["memories"] and found["memories"][0]["id"] == added["id"]
    assert "occurredAt" not in found["memories"][0]  # not known: not shown
    deployed = await ok(session, "memory_search", apiKeyId=tenant, query="deployed billing service")
    by_id = {m["id"]: m for m in deployed["memories"]}
    assert other["id"] in by_id and by_id[other["id"]]["occurredAt"] == "2023-12-29T14:30:00Z"
    only_episodic = await ok(session, "memory_search", apiKeyId=tenant, query="dark mode editor", type="episodic")
    assert all(m["type"] == "episodic" for m in only_episodic["memories"])
    # The relevance floor: a long query sharing one word with a memory (keyword overlap 2/21,
    # below search's 0.10) finds nothing and says how much fell below the floor; minScore 0
    # returns the ranked memories anyway.
    one_word = (
        "which cheap bitter dark chocolate brand should I buy for my niece's birthday party tonight "
        "at the lake house, and how many bars per guest"
    )
    unrelated = await ok(session, "memory_search", apiKeyId=tenant, query=one_word)
    floor = unrelated["relevanceFloor"]
    assert unrelated["memories"] == [] and floor["belowFloor"] >= 1 and floor["keywordOverlap"] > 0, unrelated
    assert "below the relevance floor left out" in floor["note"]
    assert floor["belowFloor"] == unrelated["resolution"]["belowMinScore"]
    everything = await ok(session, "memory_search", apiKeyId=tenant, query=one_word, minScore=0)
    assert everything["memories"] and everything["relevanceFloor"]["keywordOverlap"] == 0
    assert everything["relevanceFloor"]["note"].startswith("no relevance floor applied")
    updated = await ok(session, "memory_update", id=added["id"], content="The user prefers light mode", type="semantic")
    assert (updated["memory"]["content"], updated["memory"]["type"]) == ("The user prefers light mode", "semantic")
    dated = await ok(session, "memory_update", id=added["id"], occurredAt="2024-02-03T10:00:00+01:00")
    assert dated["memory"]["occurredAt"] == "2024-02-03T09:00:00Z"
    assert dated["memory"]["content"] == "The user prefers light mode"  # fields left out stay as they are
    assert (await ok(session, "memory_delete", id=other["id"]))["success"] is True
    assert "not found" in await failure(session, "memory_get", id=other["id"])
    cleared = await ok(session, "memory_clear", apiKeyId=tenant, olderThan="2999-01-01T00:00:00Z")
    assert cleared["deletedCount"] == 1
    assert (await ok(session, "memory_list", apiKeyId=tenant))["total"] == 0


async def check_bad_arguments(session: ClientSession, tenant: str) -> None:
    """Each refusal names the argument and what is wrong with it, and stores nothing."""
    text = await failure(session, "memory_add", apiKeyId=tenant, content="x", type="opinion")
    assert "type: 'opinion' is not one of ['factual', 'episodic', 'procedural', 'semantic']" in text
    text = await failure(session, "memory_add", apikeyid=tenant, content="x", type="factual")
    assert "'apikeyid' was unexpected" in text
    assert "'content' is a required property" in await failure(session, "memory_add", apiKeyId=tenant, type="factual")
    assert "limit: 0 is less than the minimum of 1" in await failure(
        session, "memory_search", apiKeyId=tenant, query="x", limit=0
    )
    assert "maxTokens: 'many' is not of type 'integer'" in await failure(
        session, "memory_search", apiKeyId=tenant, query="x", maxTokens="many"
    )
    assert "minScore: 2 is greater than the maximum of 1" in await failure(
        session, "memory_search", apiKeyId=tenant, query="x", minScore=2
    )
    # Checked by the server: its field violation comes back as the message.
    text = await failure(session, "memory_add", apiKeyId=tenant, content="x" * 40_000, type="factual")
    assert "invalid argument: content: must be at most" in text
    assert "olderThan: must be an RFC 3339 time" in await failure(
        session, "memory_clear", apiKeyId=tenant, olderThan="last week"
    )
    assert "occurredAt: must be an RFC 3339 time" in await failure(
        session, "memory_add", apiKeyId=tenant, content="x", type="factual", occurredAt="Friday"
    )
    assert "invalid argument: occurredAt: is in the future" in await failure(
        session, "memory_add", apiKeyId=tenant, content="x", type="factual", occurredAt="2999-01-01T00:00:00Z"
    )
    assert "occurredAt: must be an RFC 3339 time" in await failure(
        session, "memory_update", id="no-such-memory", occurredAt="Friday"
    )
    assert "apiKeyId: is required" in await failure(session, "memory_add", content="x", type="factual")
    assert "not found" in await failure(session, "memory_get", id="no-such-memory")
    assert (await ok(session, "memory_list", apiKeyId=tenant))["total"] == 0


async def check_tenant_isolation(session: ClientSession, own: str, other: str, other_id: str) -> None:
    """A token of tenant `own` works on its tenant and cannot reach `other`'s memory
    `other_id` through any tool: naming the tenant is refused, the id is not found."""
    # Its only tenant is the default where apiKeyId is left out.
    mine = await ok(session, "memory_add", content="A's own note about the garden", type="factual")
    assert (await ok(session, "memory_get", id=mine["id"]))["apiKeyId"] == own
    for name, arguments in [
        ("memory_add", {"content": "planted", "type": "factual"}),
        ("memory_list", {}),
        ("memory_search", {"query": "plan"}),
        ("memory_clear", {}),
    ]:
        text = await failure(session, name, apiKeyId=other, **arguments)
        assert text.startswith(f"Error executing tool {name}: permission denied"), text
    for name, arguments in [("memory_get", {}), ("memory_update", {"content": "hijacked"}), ("memory_delete", {})]:
        assert "not found" in await failure(session, name, id=other_id, **arguments), name
    for listed in (await ok(session, "memory_list", apiKeyId=own), await ok(session, "memory_list")):
        assert [m["id"] for m in listed["data"]] == [mine["id"]]
    assert [m["id"] for m in (await ok(session, "memory_search", query="garden note"))["memories"]] == [mine["id"]]


async def check_keep_and_limit(
    session: ClientSession, tenant: str, age: Callable[[str], None], access_counts: Callable[[], dict[str, int]]
) -> None:
    """memory_add and memory_update `keep`: a kept memory older than retentionDays (30, the
    default) is still found, the other is counted in skippedForAge. memory_search `limit` is
    Retrieve's own: only what is returned counts as accessed. `age(id)` makes a memory 90
    days old; `access_counts()` reads the stored access counters."""
    name = await ok(session, "memory_add", apiKeyId=tenant, content="The user's name is Ada", type="factual", keep=True)
    note = await ok(session, "memory_add", apiKeyId=tenant, content="Ada mentioned a dentist", type="episodic")
    assert (await ok(session, "memory_get", id=name["id"]))["keep"] is True
    for memory in (name, note):
        age(memory["id"])
    found = await ok(session, "memory_search", apiKeyId=tenant, query="Ada")
    assert [m["id"] for m in found["memories"]] == [name["id"]] and found["resolution"]["skippedForAge"] == 1
    assert (await ok(session, "memory_update", id=note["id"], keep=True))["memory"]["keep"] is True
    found = await ok(session, "memory_search", apiKeyId=tenant, query="Ada")
    assert {m["id"] for m in found["memories"]} == {name["id"], note["id"]}
    assert found["resolution"]["skippedForAge"] == 0

    herons = [
        (await ok(session, "memory_add", apiKeyId=tenant, content=f"Heron sighting number {i}", type="episodic"))["id"]
        for i in range(3)
    ]
    before = access_counts()
    found = await ok(session, "memory_search", apiKeyId=tenant, query="heron sighting", limit=1)
    assert len(found["memories"]) == 1 and found["memories"][0]["id"] in herons
    after = access_counts()
    assert {i: after[i] - before[i] for i in herons} == {i: int(i == found["memories"][0]["id"]) for i in herons}
