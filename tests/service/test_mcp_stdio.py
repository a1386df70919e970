"""The MCP server over stdio: `memsvc mcp` launched as a desktop agent launches it, with its
token in MEMSVC_TOKEN, driven by the SDK's own client against a real server: at the current
revision (2026-07-28, negotiated by `server/discover`), through the initialize handshake
(the SDK's ClientSession, 2025-11-25) and, as raw JSON-RPC lines, at older revisions."""

from __future__ import annotations

import json
import os
import subprocess

import anyio
import pytest
from conftest import free_port, make_config, start_server
from mcp.types import INTERNAL_ERROR
from support.grpc_recorder import RecordingHop

from memsvc.v1 import memory_pb2 as mpb
from tests.service.test_engine_retrieval import access_counts
from tests.service.test_retention import age
from tests.support.mcp_session import (
    BIN,
    TOOL_ORDER,
    check_bad_arguments,
    check_current_revision,
    check_history_as_of_and_merge,
    check_keep_and_limit,
    check_listing,
    check_recall_prompt,
    check_resource_isolation,
    check_resources,
    check_tenant_isolation,
    check_trace_forwarded,
    exercise_every_tool,
    failure,
    ok,
    protocol_error,
    stdio_client,
    stdio_session,
    traced_requests,
)
from tests.support.vectors import models, remote_settings, set_memory, vec_rows  # noqa: F401 - fixture

TOKEN = "mcp-stdio-admin-token"


@pytest.fixture
def authed(tmp_path):
    handle = start_server(make_config(tmp_path, api_tokens=(TOKEN,)))
    set_memory(handle.stubs(TOKEN), enabled=True)
    yield handle
    handle.stop()


def run(server_port, token, scenario, tmp_path):
    async def main():
        async with stdio_session(server_port, token, tmp_path / "mcp-stderr.log") as session:
            await scenario(session)

    anyio.run(main)


def run_current(server_port, token, scenario, tmp_path):
    """`scenario` with the SDK's Client, which negotiates the current revision."""

    async def main():
        async with stdio_client(server_port, token, tmp_path / "mcp-stderr.log") as client:
            await scenario(client)

    anyio.run(main)


def test_lists_the_tools_with_their_schemas(authed, tmp_path):
    run(authed.port, TOKEN, check_listing, tmp_path)


def test_every_tool_works_against_the_real_server(authed, tmp_path):
    run(authed.port, TOKEN, lambda session: exercise_every_tool(session, "tenant-stdio"), tmp_path)
    listing = authed.stubs(TOKEN).memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="tenant-stdio"))
    assert listing.total == 0  # the scenario cleared what it added, as the server sees it


def test_bad_arguments_are_tool_errors_that_say_what_is_wrong(authed, tmp_path):
    run(authed.port, TOKEN, lambda session: check_bad_arguments(session, "tenant-bad"), tmp_path)
    assert authed.stubs(TOKEN).memory.ListMemories(mpb.ListMemoriesRequest()).total == 0


@pytest.mark.parametrize("token", ["not-the-token", None])
def test_a_refused_token_is_a_clear_tool_error(authed, tmp_path, token):
    async def scenario(session):
        text = await failure(session, "memory_add", apiKeyId="t", content="x", type="factual")
        assert "not authorized: the memsvc server refused the bearer token" in text
        assert "not authorized" in await failure(session, "memory_get", id="any")
        # Without apiKeyId the tool first asks the server who the caller is: refused alike.
        assert "not authorized" in await failure(session, "memory_list")
        # Outside a tool call the refusal is a JSON-RPC error with the same message.
        for request in (
            session.list_resources(),
            session.read_resource("memsvc://memories/any"),
            session.get_prompt("recall", {"query": "x", "apiKeyId": "t"}),
        ):
            refused = await protocol_error(request)
            assert refused.code == INTERNAL_ERROR and "not authorized: the memsvc server refused" in refused.message

    run(authed.port, token, scenario, tmp_path)
    assert authed.stubs(TOKEN).memory.ListMemories(mpb.ListMemoriesRequest()).total == 0


def test_a_server_that_is_down_is_a_clear_tool_error(tmp_path):
    async def scenario(session):
        assert "memsvc is unavailable at 127.0.0.1:" in await failure(session, "memory_get", id="x")

    run(free_port(), TOKEN, scenario, tmp_path)


def test_clear_removes_the_vectors_too(tmp_path, models):
    handle = start_server(make_config(tmp_path, api_tokens=(TOKEN,)))
    try:
        set_memory(handle.stubs(TOKEN), **remote_settings(models))
        before = vec_rows(handle)

        async def scenario(session):
            for text in ("I water the plants on Sundays", "My sister lives in Lyon"):
                await ok(session, "memory_add", apiKeyId="tenant-vec", content=text, type="factual")
            assert vec_rows(handle) == before + 2
            assert (await ok(session, "memory_clear", apiKeyId="tenant-vec"))["deletedCount"] == 2

        run(handle.port, TOKEN, scenario, tmp_path)
        assert vec_rows(handle) == before
    finally:
        handle.stop()


def test_a_tenant_token_never_reaches_another_tenant(authed, tmp_path):
    admin = authed.stubs(TOKEN)
    other_id = admin.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="tenant-B", content="B's secret plan")).id
    token = authed.app.credentials.create("mcp-a", ["read:memory", "write:memory"], ["tenant-A"], False).token
    run(authed.port, token, lambda session: check_tenant_isolation(session, "tenant-A", "tenant-B", other_id), tmp_path)
    b = admin.memory.GetMemory(mpb.GetMemoryRequest(id=other_id))
    assert b.content == "B's secret plan"
    assert admin.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="tenant-B")).total == 1


def test_a_read_only_token_cannot_write(authed, tmp_path):
    token = authed.app.credentials.create("mcp-ro", ["read:memory"], ["tenant-R"], False).token

    async def scenario(session):
        text = await failure(session, "memory_add", apiKeyId="tenant-R", content="x", type="factual")
        assert "permission denied" in text and "write:memory" in text
        assert (await ok(session, "memory_list", apiKeyId="tenant-R"))["total"] == 0

    run(authed.port, token, scenario, tmp_path)


def test_a_token_of_several_tenants_must_name_one(authed, tmp_path):
    token = authed.app.credentials.create(
        "mcp-two", ["read:memory", "write:memory"], ["tenant-X", "tenant-Y"], False
    ).token

    async def scenario(session):
        for name, arguments in [
            ("memory_add", {"content": "x", "type": "factual"}),
            ("memory_list", {}),
            ("memory_clear", {}),
        ]:
            text = await failure(session, name, **arguments)
            assert "apiKeyId: is required, since this token may address 2 tenants (tenant-X, tenant-Y)" in text
        assert (await ok(session, "memory_add", apiKeyId="tenant-Y", content="y", type="factual"))["created"]

    run(authed.port, token, scenario, tmp_path)
    assert authed.stubs(TOKEN).memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="tenant-Y")).total == 1


def test_add_and_update_keep_and_search_limit(authed, tmp_path):
    """keep on memory_add and memory_update reaches the server (a kept old memory is still
    found), and memory_search's limit is Retrieve's own (only what is returned is accessed)."""
    run(
        authed.port,
        TOKEN,
        lambda session: check_keep_and_limit(
            session, "tenant-keep", lambda memory_id: age(authed, memory_id, 90), lambda: access_counts(authed)
        ),
        tmp_path,
    )


def test_history_as_of_and_merge_with_two_agents_and_an_outsider(authed, tmp_path):
    """memory_history with the authors of two credentials, memory_search asOf, memory_add's
    mergedInto, and another tenant's memory_history refused as not found, each session a
    `memsvc mcp` launched with its own MEMSVC_TOKEN."""
    credentials = authed.app.credentials
    writers = tuple(
        credentials.create(name, ["read:memory", "write:memory"], ["tenant-life"], False).token
        for name in ("agent-a", "agent-b")
    )
    outsider = credentials.create("agent-out", ["read:memory", "write:memory"], ["tenant-out"], False).token

    def connect(token):
        return stdio_client(authed.port, token, tmp_path / "mcp-stderr.log")

    anyio.run(check_history_as_of_and_merge, connect, "tenant-life", writers, outsider)
    listing = authed.stubs(TOKEN).memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="tenant-life"))
    assert listing.total == 2  # the fact (replaced in place) and the cat (the repeat merged)


def test_serves_the_current_revision_through_server_discover(authed, tmp_path):
    async def scenario(client):
        await check_current_revision(client)
        await check_listing(client)
        await exercise_every_tool(client, "tenant-current")

    run_current(authed.port, TOKEN, scenario, tmp_path)


def rpc_lines(grpc_port: int, token: str, messages: list[dict], tmp_path) -> list[dict]:
    """Raw JSON-RPC over `memsvc mcp`'s stdin/stdout, one message a line, as a client that
    predates the SDK's current revision speaks it: each request waits for its answer (stdin
    closes after the last); the answers, in order."""
    answers = []
    with (tmp_path / "mcp-stderr.log").open("a") as errlog:
        process = subprocess.Popen(
            [str(BIN / "memsvc"), "mcp", "--grpc-port", str(grpc_port)],
            env={**os.environ, "MEMSVC_TOKEN": token},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            text=True,
        )
        try:
            for message in messages:
                process.stdin.write(json.dumps(message) + "\n")
                process.stdin.flush()
                while "id" in message:  # a notification has no answer
                    answer = json.loads(process.stdout.readline())
                    if answer.get("id") == message["id"]:
                        answers.append(answer)
                        break
            process.stdin.close()
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
    return answers


def handshake(version: str) -> list[dict]:
    return [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18"])
def test_an_older_client_gets_the_revision_it_asks_for(authed, tmp_path, version):
    """The handshake keeps the client's older revision, and answers are shaped for it: none
    carries the 2026-07-28 result fields (resultType, ttlMs, cacheScope)."""
    authed.stubs(TOKEN).memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="t-old", content="an old note"))
    answers = rpc_lines(
        authed.port,
        TOKEN,
        [
            *handshake(version),
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "resources/list"},
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "prompts/get",
                "params": {"name": "recall", "arguments": {"query": "old note", "apiKeyId": "t-old"}},
            },
        ],
        tmp_path,
    )
    assert all("result" in answer for answer in answers), answers
    initialized, tools, resources, prompt = (answer["result"] for answer in answers)
    assert initialized["protocolVersion"] == version
    assert {"tools", "resources", "prompts"} <= set(initialized["capabilities"])
    assert [tool["name"] for tool in tools["tools"]] == TOOL_ORDER
    (resource,) = resources["resources"]
    assert resource["uri"].startswith("memsvc://memories/")
    for result in (tools, resources, prompt):
        assert not {"resultType", "ttlMs", "cacheScope"} & set(result), result.keys()
    assert "an old note</memory>" in prompt["messages"][0]["content"]["text"]


def test_a_client_of_an_unknown_revision_is_offered_the_newest_handshake_one(authed, tmp_path):
    (answer,) = rpc_lines(authed.port, TOKEN, handshake("2023-01-01"), tmp_path)
    assert answer["result"]["protocolVersion"] == "2025-11-25"


def test_memories_are_resources_a_page_at_a_time(authed, tmp_path):
    admin = authed.stubs(TOKEN)
    for i in range(57):
        admin.memory.CreateMemory(
            mpb.CreateMemoryRequest(api_key_id="tenant-res", content=f"Heron sighting {i}", type="factual")
        )
    listing = admin.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="tenant-res", limit=200))
    run_current(
        authed.port, TOKEN, lambda client: check_resources(client, "tenant-res", [m.id for m in listing.data]), tmp_path
    )


def test_the_recall_prompt(authed, tmp_path):
    run_current(authed.port, TOKEN, lambda client: check_recall_prompt(client, "tenant-recall"), tmp_path)


def test_a_tenant_token_lists_and_reads_only_its_own_memories(authed, tmp_path):
    admin = authed.stubs(TOKEN)
    secret = "B keeps the spare key under the blue flowerpot"
    other_id = admin.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="tenant-B", content=secret)).id
    own = {
        admin.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="tenant-A", content=text)).id
        for text in ("A waters the flowerpot on Sundays", "A's key is on the hook")
    }
    token = authed.app.credentials.create("mcp-res-a", ["read:memory"], ["tenant-A"], False).token
    run_current(
        authed.port, token, lambda client: check_resource_isolation(client, own, "tenant-B", other_id, secret), tmp_path
    )


def test_trace_context_in_meta_travels_on_to_memsvc(authed, tmp_path):
    """The agent's traceparent/tracestate from each request's `_meta` arrive at memsvc as
    gRPC metadata of every RPC the request makes (observed on a recording hop in front of the
    real server); a request without them adds none."""
    hop = RecordingHop(f"127.0.0.1:{authed.port}")
    try:

        async def scenario(client):
            await traced_requests(client, "tenant-trace")
            check_trace_forwarded(hop.calls)
            hop.clear()
            await ok(client, "memory_list", apiKeyId="tenant-trace")
            (untraced,) = hop.calls
            assert "traceparent" not in untraced.metadata and "tracestate" not in untraced.metadata
            assert untraced.metadata["authorization"] == f"Bearer {TOKEN}"

        run_current(hop.port, TOKEN, scenario, tmp_path)
    finally:
        hop.stop()
