"""The MCP server memsvc serves, the same over stdio and streamable HTTP: the eight memory
tools (in a fixed order), the caller's memories as resources and the `recall` prompt.

Protocol revisions are the SDK's (mcp 2.3): 2026-07-28, the stateless revision (each
request carries its protocol version in `_meta`; `server/discover` tells a client what is
served), and the initialize handshake of 2024-11-05 to 2025-11-25 for older clients; the
client's first request decides. No list changes are announced (no `subscriptions/listen`,
`listChanged` false): the tools and the prompt are fixed, and the resources are listed
afresh on request.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from mcp.server.mcpserver import MCPServer

from memsvc.mcp.arguments import ArgumentCheck
from memsvc.mcp.caller import Credential
from memsvc.mcp.prompts import RecallPrompt
from memsvc.mcp.resources import MemoryResources
from memsvc.mcp.tools import memory_tools
from memsvc.mcp.upstream import Upstream

INSTRUCTIONS = (
    "Long-term memory for this user, kept by memsvc. Search it (memory_search) before answering "
    "questions that may depend on what the user said earlier; store durable facts, preferences, "
    "decisions and procedures with memory_add. Memory types: factual (facts and preferences), "
    "episodic (events and decisions), procedural (how-tos and habits), semantic (general "
    "knowledge and summaries). memory_history tells how a memory changed, who changed it and "
    "what it said before; memory_search with asOf answers as things stood at an earlier time. "
    "The memories are also resources (memsvc://memories/{id}), and the recall prompt puts the "
    "ones relevant to a request before it."
)


def _version() -> str:
    try:
        return version("memsvc")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return ""


def build_server(upstream: Upstream, credential: Credential) -> MCPServer:
    """The MCP server whose every handler reaches memsvc through `upstream` with the
    `authorization` value `credential` gives for the request being served."""
    tools = memory_tools(upstream, credential)
    resources = MemoryResources(upstream, credential)
    recall = RecallPrompt(upstream, credential).prompt()
    server = MCPServer(
        "memsvc",
        title="memsvc",
        version=_version(),
        instructions=INSTRUCTIONS,
        tools=tools,
        subscriptions=False,
        middleware=[ArgumentCheck(tools, [recall])],
    )
    resources.register(server)
    server.add_prompt(recall)
    return server
