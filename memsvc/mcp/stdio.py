"""`memsvc mcp`: the MCP server (tools, resources, the recall prompt) over stdio, the
command a desktop agent's config launches.

Stdout carries the protocol, so everything else (logs) goes to stderr. The one caller is
the agent that started the process; its token comes from MEMSVC_TOKEN in the environment
the agent's config sets, and is sent with every RPC to the server at --server (default:
the configured gRPC port on loopback).
"""

from __future__ import annotations

from memsvc.client import server_address
from memsvc.config import Config
from memsvc.mcp.server import build_server
from memsvc.mcp.upstream import Upstream, bearer


async def serve_stdio(config: Config, address: str | None = None) -> None:
    """Serve until the agent closes stdin."""
    upstream = Upstream(server_address(config, address), config.max_message_bytes)
    authorization = bearer(config.token)
    try:
        await build_server(upstream, lambda ctx: authorization).run_stdio_async()
    finally:
        await upstream.close()
