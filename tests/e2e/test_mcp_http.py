"""The MCP server over streamable HTTP at /mcp, through the real Envoy in front of the real
server, driven by the SDK's own client at the current revision (2026-07-28, after
`server/discover`) and through the initialize handshake (ClientSession, 2025-11-25), and by
raw JSON-RPC at older revisions; each request's Authorization header is the credential the
tools forward, and `memsvc serve` runs the MCP server beside gRPC."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from dataclasses import replace

import anyio
import pytest
from conftest import free_port, make_config, start_server
from support.grpc_recorder import RecordingHop
from support.serve_process import ServeProcess

from memsvc.gateway.launcher import Gateway
from memsvc.mcp.http import McpHttp
from memsvc.v1 import memory_pb2 as mpb
from tests.service.test_engine_retrieval import access_counts
from tests.service.test_retention import age
from tests.support.mcp_session import (
    CURRENT,
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
    http_client,
    http_session,
    ok,
    traced_requests,
)
from tests.support.vectors import set_memory

pytestmark = pytest.mark.e2e
TOKEN = "mcp-http-admin-token"


class Stack:
    """A server, its MCP HTTP server (in the server's event loop, as `serve` runs it) and
    Envoy routing /mcp to it; with `hop`, the MCP server reaches gRPC through a recording hop
    (support.grpc_recorder) in front of the server."""

    def __init__(self, tmp_path, hop: bool = False, **overrides):
        self.server = start_server(make_config(tmp_path, api_tokens=(TOKEN,), mcp_port=0, **overrides))
        self.hop = RecordingHop(f"127.0.0.1:{self.server.port}") if hop else None
        upstream_port = self.hop.port if self.hop else self.server.port
        self.mcp = self._in_loop(McpHttp.start(self.server.config, upstream_port))
        conf = replace(self.server.config, rest_port=free_port(), mcp_port=self.mcp.port)
        self.gateway = Gateway.for_config(conf, grpc_port=self.server.port)
        self.rest_port = self.gateway.start()
        self.url = f"http://127.0.0.1:{self.rest_port}/mcp"

    def _in_loop(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.server.loop).result(60)

    def stop(self):
        self.gateway.stop()
        self._in_loop(self.mcp.stop())
        if self.hop:
            self.hop.stop()
        self.server.stop()


@pytest.fixture
def stack(tmp_path):
    running = Stack(tmp_path)
    set_memory(running.server.stubs(TOKEN), enabled=True)
    yield running
    running.stop()


def run(url, token, scenario):
    async def main():
        async with http_session(url, token) as session:
            await scenario(session)

    anyio.run(main)


def run_current(url, token, scenario):
    """`scenario` with the SDK's Client, which negotiates the current revision."""

    async def main():
        async with http_client(url, token) as client:
            await scenario(client)

    anyio.run(main)


def post(url, message, token=TOKEN, **headers):
    """One raw JSON-RPC request to /mcp: its answer."""
    request = urllib.request.Request(
        url,
        data=json.dumps(message).encode(),
        method="POST",
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "authorization": f"Bearer {token}",
            **headers,
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_lists_the_tools_and_every_tool_works_through_envoy(stack):
    run(stack.url, TOKEN, check_listing)
    run(stack.url, TOKEN, lambda session: exercise_every_tool(session, "tenant-http"))
    listing = stack.server.stubs(TOKEN).memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="tenant-http"))
    assert listing.total == 0


def test_bad_arguments_are_tool_errors_that_say_what_is_wrong(stack):
    run(stack.url, TOKEN, lambda session: check_bad_arguments(session, "tenant-bad"))


def test_each_request_is_checked_with_its_own_token(stack):
    """Two clients of the same MCP server at once: the one with a wrong or no token is
    refused on every call while the other keeps working; nothing is shared between them."""

    async def main():
        async with (
            http_session(stack.url, TOKEN) as good,
            http_session(stack.url, "wrong-token") as bad,
            http_session(stack.url, None) as anonymous,
        ):
            for n, session in enumerate((bad, anonymous, bad)):
                text = await failure(session, "memory_add", apiKeyId="t", content="x", type="factual")
                assert "not authorized: the memsvc server refused the bearer token" in text
                # Distinct texts (a new number): a repeat would be merged into the first.
                await ok(good, "memory_add", apiKeyId="t", content=f"kept {n}", type="factual")

    anyio.run(main)
    assert stack.server.stubs(TOKEN).memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="t")).total == 3


def test_a_tenant_token_never_reaches_another_tenant(stack):
    admin = stack.server.stubs(TOKEN)
    other_id = admin.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="tenant-B", content="B's plan")).id
    token = stack.server.app.credentials.create(
        "mcp-http-a", ["read:memory", "write:memory"], ["tenant-A"], False
    ).token
    run(stack.url, token, lambda session: check_tenant_isolation(session, "tenant-A", "tenant-B", other_id))
    assert admin.memory.GetMemory(mpb.GetMemoryRequest(id=other_id)).content == "B's plan"


def test_history_as_of_and_merge_with_two_agents_and_an_outsider(stack):
    """memory_history with the authors of two credentials, memory_search asOf, memory_add's
    mergedInto, and another tenant's memory_history refused as not found, each session with
    its own Authorization header, through Envoy (the handshake-era ClientSession)."""
    credentials = stack.server.app.credentials
    writers = tuple(
        credentials.create(name, ["read:memory", "write:memory"], ["tenant-life"], False).token
        for name in ("agent-a", "agent-b")
    )
    outsider = credentials.create("agent-out", ["read:memory", "write:memory"], ["tenant-out"], False).token
    anyio.run(
        check_history_as_of_and_merge, lambda token: http_session(stack.url, token), "tenant-life", writers, outsider
    )
    listing = stack.server.stubs(TOKEN).memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="tenant-life"))
    assert listing.total == 2  # the fact (replaced in place) and the cat (the repeat merged)


def test_a_page_on_another_origin_is_refused_when_rest_is_loopback_only(stack):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    request = urllib.request.Request(
        stack.url,
        data=body,
        method="POST",
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "authorization": f"Bearer {TOKEN}",
            "origin": "http://evil.example",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403


def test_serve_runs_the_mcp_server_behind_envoy_and_stops_it(tmp_path):
    process = ServeProcess(
        tmp_path / "data",
        free_port(),
        free_port(),
        env_extra={"MEMSVC_API_TOKENS": TOKEN},
        extra_args=("--mcp-port", "0"),
    )
    try:
        started = process.wait_for("mcp.started")
        rest_port = process.wait_for("gateway.started")["rest_port"]
        url = f"http://127.0.0.1:{rest_port}/mcp"

        async def scenario(session):
            added = await ok(session, "memory_add", apiKeyId="t-serve", content="served over MCP", type="factual")
            assert (await ok(session, "memory_get", id=added["id"]))["content"] == "served over MCP"

        run(url, TOKEN, scenario)
    finally:
        process.stop()
    assert process.exit_code() == 0
    with pytest.raises(OSError):  # the MCP port is closed with the server
        urllib.request.urlopen(f"http://127.0.0.1:{started['mcp_port']}/mcp", timeout=5)


def test_a_taken_mcp_port_is_logged_and_leaves_mcp_out_while_rest_serves(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = ServeProcess(
            tmp_path / "data",
            free_port(),
            free_port(),
            env_extra={"MEMSVC_API_TOKENS": TOKEN},
            extra_args=("--mcp-port", str(port)),
        )
        try:
            assert process.wait_for("mcp.bind_failed")["port"] == port
            rest = f"http://127.0.0.1:{process.wait_for('gateway.started')['rest_port']}"
            request = urllib.request.Request(
                rest + "/api/memory?apiKeyId=t", headers={"authorization": f"Bearer {TOKEN}"}
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                assert response.status == 200
            post = urllib.request.Request(
                rest + "/mcp",
                data=b"{}",
                method="POST",
                headers={"content-type": "application/json", "authorization": f"Bearer {TOKEN}"},
            )
            with pytest.raises(urllib.error.HTTPError) as missing:  # no route to whatever holds the port
                urllib.request.urlopen(post, timeout=30)
            assert missing.value.code == 404
        finally:
            process.stop()


def test_add_and_update_keep_and_search_limit(stack):
    """keep on memory_add and memory_update reaches the server (a kept old memory is still
    found), and memory_search's limit is Retrieve's own (only what is returned is accessed)."""
    run(
        stack.url,
        TOKEN,
        lambda session: check_keep_and_limit(
            session,
            "tenant-keep",
            lambda memory_id: age(stack.server, memory_id, 90),
            lambda: access_counts(stack.server),
        ),
    )


def test_serves_the_current_revision_through_envoy(stack):
    async def scenario(client):
        await check_current_revision(client)
        await check_listing(client)
        await exercise_every_tool(client, "tenant-current")

    run_current(stack.url, TOKEN, scenario)


def test_server_discover_says_what_is_served(stack):
    """`server/discover` as a client of the current revision sends it, the envelope in `_meta`
    and the routing headers beside it."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": CURRENT,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    answer = post(
        stack.url,
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}},
        **{"mcp-protocol-version": CURRENT, "mcp-method": "server/discover"},
    )
    result = answer["result"]
    assert result["supportedVersions"] == [CURRENT]
    assert {"tools", "resources", "prompts"} <= set(result["capabilities"])
    assert result["capabilities"]["resources"] == {"listChanged": False, "subscribe": False}
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "memsvc"
    assert "recall prompt" in result["instructions"]


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18"])
def test_an_older_client_gets_the_revision_it_asks_for(stack, version):
    """Stateless: each request stands alone, so an older client's initialize answers its
    revision and its next requests (with the header it negotiated) are served at it."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}},
    }
    result = post(stack.url, initialize)["result"]
    assert result["protocolVersion"] == version
    assert {"tools", "resources", "prompts"} <= set(result["capabilities"])
    tools = post(stack.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, **{"mcp-protocol-version": version})
    assert [tool["name"] for tool in tools["result"]["tools"]] == TOOL_ORDER
    assert "resultType" not in tools["result"]  # shaped for the older revision


def test_memories_are_resources_a_page_at_a_time(stack):
    admin = stack.server.stubs(TOKEN)
    for i in range(57):
        admin.memory.CreateMemory(
            mpb.CreateMemoryRequest(api_key_id="tenant-res", content=f"Heron {i}", type="factual")
        )
    listing = admin.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="tenant-res", limit=200))
    run_current(stack.url, TOKEN, lambda client: check_resources(client, "tenant-res", [m.id for m in listing.data]))


def test_the_recall_prompt(stack):
    run_current(stack.url, TOKEN, lambda client: check_recall_prompt(client, "tenant-recall"))


def test_a_tenant_token_lists_and_reads_only_its_own_memories(stack):
    admin = stack.server.stubs(TOKEN)
    secret = "B keeps the spare key under the blue flowerpot"
    other_id = admin.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="tenant-B", content=secret)).id
    own = {
        admin.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="tenant-A", content=text)).id
        for text in ("A waters the flowerpot on Sundays", "A's key is on the hook")
    }
    token = stack.server.app.credentials.create("mcp-http-res-a", ["read:memory"], ["tenant-A"], False).token
    run_current(stack.url, token, lambda client: check_resource_isolation(client, own, "tenant-B", other_id, secret))


def test_trace_context_in_meta_travels_on_to_memsvc(tmp_path):
    """Through Envoy to the MCP server, then as gRPC metadata of every RPC it makes, observed
    on a recording hop in front of the real server."""
    traced = Stack(tmp_path, hop=True)
    try:
        set_memory(traced.server.stubs(TOKEN), enabled=True)
        traced.hop.clear()
        run_current(traced.url, TOKEN, lambda client: traced_requests(client, "tenant-trace"))
        check_trace_forwarded(traced.hop.calls)
        assert all(call.metadata["authorization"] == f"Bearer {TOKEN}" for call in traced.hop.calls)
    finally:
        traced.stop()
