"""The MCP tools over streamable HTTP at /mcp, through the real Envoy in front of the real
server, driven by the SDK's own ClientSession; each request's Authorization header is the
credential the tools forward, and `memsvc serve` runs the MCP server beside gRPC."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from dataclasses import replace

import anyio
import pytest
from conftest import free_port, make_config, start_server
from support.serve_process import ServeProcess

from memsvc.gateway.launcher import Gateway
from memsvc.mcp.http import McpHttp
from memsvc.v1 import memory_pb2 as mpb
from tests.service.test_engine_retrieval import access_counts
from tests.service.test_retention import age
from tests.support.mcp_session import (
    check_bad_arguments,
    check_keep_and_limit,
    check_listing,
    check_tenant_isolation,
    exercise_every_tool,
    failure,
    http_session,
    ok,
)
from tests.support.vectors import set_memory

pytestmark = pytest.mark.e2e
TOKEN = "mcp-http-admin-token"


class Stack:
    """A server, its MCP HTTP server (in the server's event loop, as `serve` runs it) and
    Envoy routing /mcp to it."""

    def __init__(self, tmp_path, **overrides):
        self.server = start_server(make_config(tmp_path, api_tokens=(TOKEN,), mcp_port=0, **overrides))
        self.mcp = self._in_loop(McpHttp.start(self.server.config, self.server.port))
        conf = replace(self.server.config, rest_port=free_port(), mcp_port=self.mcp.port)
        self.gateway = Gateway.for_config(conf, grpc_port=self.server.port)
        self.rest_port = self.gateway.start()
        self.url = f"http://127.0.0.1:{self.rest_port}/mcp"

    def _in_loop(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.server.loop).result(60)

    def stop(self):
        self.gateway.stop()
        self._in_loop(self.mcp.stop())
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
            for session in (bad, anonymous, bad):
                text = await failure(session, "memory_add", apiKeyId="t", content="x", type="factual")
                assert "not authorized: the memsvc server refused the bearer token" in text
                await ok(good, "memory_add", apiKeyId="t", content="kept", type="factual")

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
