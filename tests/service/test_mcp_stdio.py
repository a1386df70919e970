"""The MCP tools over stdio: `memsvc mcp` launched as a desktop agent launches it, with its
token in MEMSVC_TOKEN, driven by the SDK's own ClientSession against a real server."""

from __future__ import annotations

import anyio
import pytest
from conftest import free_port, make_config, start_server

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
    ok,
    stdio_session,
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


def test_lists_the_seven_tools_with_their_schemas(authed, tmp_path):
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
