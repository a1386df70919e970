"""The MCP server over streamable HTTP: an ASGI app on a loopback port, served by uvicorn
inside `memsvc serve`'s event loop and reached through Envoy at /mcp.

Each request (a tool call, a resource read, the prompt) forwards the `Authorization` header
of the HTTP request that carried it, so every caller is checked by the gRPC server with its
own token; the HTTP server has no token of its own. It is stateless (no MCP session outlives
a request), so nothing one caller set up can be used by another, and JSON replies need no
long-lived streams through Envoy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace

import grpc
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from memsvc.api.oauth import OAuthSettings, bearer_token, challenge
from memsvc.client import server_address
from memsvc.config import Config
from memsvc.kernel.web_access import web_access
from memsvc.mcp.caller import header_authorization
from memsvc.mcp.server import build_server
from memsvc.mcp.upstream import Upstream
from memsvc.v1 import credentials_pb2

log = logging.getLogger("memsvc.mcp")
HOST = "127.0.0.1"
PATH = "/mcp"


def _transport_security(config: Config) -> TransportSecuritySettings:
    """The Host and Origin rule of the REST port (memsvc.kernel.web_access), which Envoy's
    request guard enforces on /mcp, repeated here for a caller that reaches this loopback
    port directly (a DNS-rebinding page aimed at it). The SDK's check knows no "same origin",
    so the origins of the allowed names are listed, and it answers a foreign Host with 421
    (through Envoy the guard has answered 403 before). A public bind without listed names
    accepts any name: it needs tokens, which a web page cannot attach."""
    access = web_access(config.rest_host, config.allowed_hosts, config.allowed_origins)
    if access.hosts is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = [h for name in access.hosts for h in (name, f"{name}:*")]
    origins = [f"{scheme}://{h}" for scheme in ("http", "https") for h in hosts]
    return TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=origins + list(access.origins))


class OAuthChallenge:
    """With OAuth on (MEMSVC_OAUTH_ISSUER), a request to /mcp without a bearer token, or with
    one the gRPC server refuses as UNAUTHENTICATED (asked with GetCaller, the one RPC anyone
    may make), is answered 401 here with the `WWW-Authenticate` challenge that points to the
    Protected Resource Metadata (RFC 9728), which is how an MCP client learns where to get
    a token. Whether the token may do what a tool then asks is still the gRPC server's call."""

    def __init__(self, app: ASGIApp, settings: OAuthSettings, upstream: Upstream):
        self.app = app
        self.settings = settings
        self.upstream = upstream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        authorization = Headers(scope=scope).get("authorization")
        given = bool(bearer_token(authorization))
        if given and await self._accepted(authorization or ""):
            await self.app(scope, receive, send)
            return
        message = "invalid bearer token" if given else "a bearer token is required"
        response = JSONResponse(
            {"code": 16, "message": message},
            status_code=401,
            headers={"www-authenticate": challenge(self.settings, PATH, invalid=given)},
        )
        await response(scope, receive, send)

    async def _accepted(self, authorization: str) -> bool:
        try:
            await self.upstream.credentials.GetCaller(
                credentials_pb2.GetCallerRequest(), metadata=(("authorization", authorization),), timeout=10
            )
        except grpc.RpcError as err:
            # Anything but a refused token (the server unreachable) is the tools' to report.
            return err.code() != grpc.StatusCode.UNAUTHENTICATED
        return True


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: `memsvc serve` owns SIGTERM/SIGINT and
    stops this server as part of its ordered shutdown."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        raise
    return sock


@dataclass
class McpHttp:
    """A running MCP HTTP server; `port` is where Envoy sends /mcp."""

    port: int
    server: _Uvicorn
    task: asyncio.Task
    upstream: Upstream

    @classmethod
    async def start(cls, config: Config, grpc_port: int) -> McpHttp:
        """Serve on config.mcp_port (0 = any free port), as a client of the gRPC server on
        `grpc_port`; returns once requests are accepted. Raises OSError when the port
        cannot be bound."""
        sock = _bind(config.mcp_port)
        # uvicorn's own start/stop lines (with terminal colour codes) add nothing to mcp.started.
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
        upstream = Upstream(server_address(replace(config, grpc_port=grpc_port)), config.max_message_bytes)
        app: ASGIApp = build_server(upstream, header_authorization).streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            json_response=True,
            transport_security=_transport_security(config),
        )
        oauth = OAuthSettings.from_config(config)
        if oauth is not None:
            app = OAuthChallenge(app, oauth, upstream)
        server = _Uvicorn(
            uvicorn.Config(
                app,
                log_config=None,
                access_log=False,
                lifespan="on",
                # uvicorn annotates int, but passes it to asyncio.timeout (seconds)
                timeout_graceful_shutdown=config.shutdown_grace_s,  # type: ignore[arg-type]
            )
        )
        task = asyncio.create_task(server.serve(sockets=[sock]), name="memsvc-mcp-http")
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if task.done():
            await upstream.close()
            task.result()  # raises what stopped it
            raise RuntimeError("the MCP HTTP server stopped while starting")
        return cls(sock.getsockname()[1], server, task, upstream)

    async def stop(self) -> None:
        """Stop accepting, let calls in flight finish (within the grace period), close."""
        self.server.should_exit = True
        with contextlib.suppress(Exception):
            await self.task
        await self.upstream.close()


async def start_http(config: Config, grpc_port: int) -> McpHttp | None:
    """What `memsvc serve` calls: the MCP HTTP server, or None when it is turned off or its
    port is taken (logged; the memory service itself matters more than this entry point)."""
    if config.mcp_port < 0:
        return None
    try:
        running = await McpHttp.start(config, grpc_port)
    except OSError as exc:
        log.error("mcp.bind_failed", extra={"port": config.mcp_port, "error": str(exc)})
        return None
    log.info("mcp.started", extra={"mcp_host": HOST, "mcp_port": running.port, "path": PATH})
    return running
