"""Registers `memsvc mcp` on the CLI without importing the MCP SDK until it runs."""

from __future__ import annotations

import argparse
import asyncio

from memsvc.client import client_options
from memsvc.config import Config

HELP = (
    "serve the memory tools, resources and recall prompt to an agent over MCP on stdin/stdout "
    "(the command a desktop agent's config launches); MEMSVC_TOKEN is the bearer token sent to the server"
)


def _run(config: Config, args: argparse.Namespace) -> int:
    from memsvc.mcp.stdio import serve_stdio

    asyncio.run(serve_stdio(config, getattr(args, "server", None)))
    return 0


def add_command(commands: argparse._SubParsersAction) -> None:
    sub = commands.add_parser("mcp", help=HELP, description=HELP)
    client_options(sub)
    sub.set_defaults(handler=_run)
