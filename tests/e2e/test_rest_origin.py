"""Who may call REST through the real Envoy: a body must be declared JSON (415), the Host
must be one the server answers to and an Origin the request's own or one the operator
listed (403), on a tokenless loopback server (the quick start) and as an operator widens it
(MEMSVC_ALLOWED_HOSTS / MEMSVC_ALLOWED_ORIGINS, a public bind). Every refusal stores nothing:
checked through the API afterwards."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
from dataclasses import replace

import pytest
from conftest import free_port, make_config, start_server

from memsvc.config import Config, ConfigError
from memsvc.gateway.launcher import Gateway
from memsvc.mcp.http import McpHttp

pytestmark = pytest.mark.e2e

OWNER = "origin-owner"
CREATE = json.dumps({"apiKeyId": OWNER, "content": "written by whoever got through"}).encode()


class Stack:
    """A server and its Envoy, configured like `memsvc serve` with `overrides`; with `mcp`,
    also its MCP HTTP server (in the server's loop, as `serve` runs it) behind /mcp."""

    def __init__(self, tmp_path, mcp: bool = False, **overrides):
        self.server = start_server(make_config(tmp_path, **overrides))
        self.mcp = (
            self._in_loop(McpHttp.start(replace(self.server.config, mcp_port=0), self.server.port)) if mcp else None
        )
        config = replace(self.server.config, rest_port=free_port(), mcp_port=self.mcp.port if self.mcp else -1)
        self.gateway = Gateway.for_config(config, grpc_port=self.server.port)
        self.port = self.gateway.start()
        self.host = f"127.0.0.1:{self.port}"
        self.token = overrides.get("api_tokens", (None,))[0]

    def send(
        self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"", host: str | None = None
    ) -> tuple[int, dict]:
        """One HTTP/1.1 request written byte for byte: the Host is whatever is given."""
        fields = {"host": host if host is not None else self.host, **(headers or {})}
        if self.token:
            fields.setdefault("authorization", f"Bearer {self.token}")
        head = [f"{method} {path} HTTP/1.1".encode()] + [f"{k}: {v}".encode() for k, v in fields.items()]
        head += [b"content-length: " + str(len(body)).encode(), b"connection: close"]
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
            response = http.client.HTTPResponse(sock, method=method)
            response.begin()
            payload = response.read()
        return response.status, json.loads(payload) if payload else {}

    def stored(self) -> list[str]:
        status, body = self.send("GET", f"/api/memory?apiKeyId={OWNER}&limit=200")
        assert status == 200, body
        return [m["content"] for m in body["data"]]

    def _in_loop(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.server.loop).result(60)

    def stop(self) -> None:
        self.gateway.stop()
        if self.mcp is not None:
            self._in_loop(self.mcp.stop())
        self.server.stop()


@pytest.fixture(scope="module")
def open_stack(tmp_path_factory):
    """The quick start: no token, loopback only, /mcp served."""
    stack = Stack(tmp_path_factory.mktemp("rest-origin"), mcp=True)
    yield stack
    stack.stop()


JSON = {"content-type": "application/json"}


# ---- the content type ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "ctype",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "text/json",
        None,
    ],
)
def test_a_body_not_declared_json_is_415_and_stores_nothing(open_stack, ctype):
    headers = {} if ctype is None else {"content-type": ctype}
    status, body = open_stack.send("POST", "/api/memory", headers, CREATE)
    assert status == 415 and body["code"] == 3, body
    assert "content-type: application/json" in body["message"]
    assert open_stack.stored() == []


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded"])
def test_an_empty_form_post_is_415_too(open_stack, ctype):
    """A `<form>` with no fields still POSTs: an empty body is a whole request (a purge)."""
    status, body = open_stack.send("POST", "/api/memory/legacy/purge", {"content-type": ctype})
    assert status == 415, body


@pytest.mark.parametrize("ctype", ["application/json", "application/json; charset=utf-8", "Application/JSON"])
def test_json_content_types_are_served(open_stack, ctype):
    content = f"declared as {ctype}"
    status, body = open_stack.send(
        "POST", "/api/memory", {"content-type": ctype}, json.dumps({"apiKeyId": OWNER, "content": content}).encode()
    )
    assert status == 200, body
    assert content in open_stack.stored()
    open_stack.send("DELETE", f"/api/memory/{body['id']}")


def test_requests_without_a_body_need_no_content_type(open_stack):
    assert open_stack.send("GET", f"/api/memory?apiKeyId={OWNER}")[0] == 200
    # A GET may name any content type (browsers and the Studio send one).
    assert open_stack.send("GET", f"/api/memory?apiKeyId={OWNER}", {"content-type": "text/plain"})[0] == 200
    assert open_stack.send("DELETE", f"/api/memory?apiKeyId={OWNER}")[0] == 200


# ---- Host ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",
        "127.0.0.1:1@evil.example",
        "127.0.0.1:{port}@evil.example",
        "user@127.0.0.1:{port}",
        "127.0.0.1.evil.example",
        "127.0.0.1:port",
        "localhost.:{port}",
        "0.0.0.0:{port}",
        "[::2]:{port}",
        "192.168.1.1",
    ],
)
def test_a_foreign_or_malformed_host_is_403_and_stores_nothing(open_stack, host):
    host = host.format(port=open_stack.port)
    status, body = open_stack.send("GET", f"/api/memory?apiKeyId={OWNER}", host=host)
    assert status == 403 and body["code"] == 7, (host, body)
    status, body = open_stack.send("POST", "/api/memory", JSON, CREATE, host=host)
    assert status == 403, (host, body)
    assert open_stack.stored() == []


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}", "[::1]:{port}", "127.0.0.1", "localhost"]
)
def test_loopback_hosts_are_served(open_stack, host):
    status, body = open_stack.send("GET", f"/api/memory?apiKeyId={OWNER}", host=host.format(port=open_stack.port))
    assert status == 200, body


# ---- Origin --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "http://127.0.0.1:1",
        "http://localhost:{port}",
        "https://127.0.0.1:{port}.evil.example",
        "null",
        "http://127.0.0.1:{port}/",
        "http://127.0.0.1:{port}, http://evil.example",
    ],
)
def test_a_foreign_origin_is_403_and_stores_nothing(open_stack, origin):
    origin = origin.format(port=open_stack.port)
    status, body = open_stack.send("POST", "/api/memory", {**JSON, "origin": origin}, CREATE)
    assert status == 403 and body["code"] == 7, (origin, body)
    assert open_stack.send("GET", f"/api/memory?apiKeyId={OWNER}", {"origin": origin})[0] == 403
    assert open_stack.stored() == []


@pytest.mark.parametrize(
    "host,origin",
    [
        ("127.0.0.1:{port}", "http://127.0.0.1:{port}"),
        ("localhost:{port}", "http://localhost:{port}"),
        ("localhost:{port}", "HTTP://LOCALHOST:{port}"),
    ],
)
def test_the_requests_own_origin_is_served(open_stack, host, origin):
    """What the Studio sends: same origin as the API."""
    port = open_stack.port
    status, body = open_stack.send(
        "POST",
        "/api/memory",
        {**JSON, "origin": origin.format(port=port)},
        json.dumps({"apiKeyId": OWNER, "content": "same origin"}).encode(),
        host=host.format(port=port),
    )
    assert status == 200, body
    assert open_stack.send("DELETE", f"/api/memory/{body['id']}")[0] == 200


# ---- /mcp: the same rule, the same answer ------------------------------------------------------

MCP_LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def test_mcp_serves_loopback_hosts_and_its_own_origin(open_stack):
    for host, origin in (
        (None, None),
        (f"localhost:{open_stack.port}", f"http://localhost:{open_stack.port}"),
        (f"[::1]:{open_stack.port}", None),
    ):
        headers = {**MCP_HEADERS, **({"origin": origin} if origin else {})}
        status, body = open_stack.send("POST", "/mcp", headers, MCP_LIST, host=host)
        assert status == 200 and "memory_search" in {t["name"] for t in body["result"]["tools"]}, (host, body)


@pytest.mark.parametrize(
    "host,origin",
    [
        ("evil.example:{port}", None),
        ("127.0.0.1:1@evil.example", None),
        ("127.0.0.1:{port}@evil.example", None),
        ("localhost.evil.example", None),
        ("127.0.0.1:{port}", "http://evil.example"),
        ("127.0.0.1:{port}", "http://localhost:{port}"),
        ("127.0.0.1:{port}", "null"),
    ],
)
def test_mcp_refuses_a_foreign_host_or_origin_with_403_like_rest(open_stack, host, origin):
    """403 with the same JSON error as REST (before, a foreign Host got the SDK's 421 and a
    Host with userinfo passed its `127.0.0.1:*` pattern)."""
    port = open_stack.port
    headers = {**MCP_HEADERS, **({"origin": origin.format(port=port)} if origin else {})}
    status, body = open_stack.send("POST", "/mcp", headers, MCP_LIST, host=host.format(port=port))
    assert status == 403 and body["code"] == 7, (host, origin, body)


# ---- what an operator widens ----------------------------------------------------------------


def test_allowed_hosts_and_origins_are_served_and_nothing_else(tmp_path):
    """Behind a reverse proxy that keeps the public name (Host) or calls from a listed app."""
    stack = Stack(
        tmp_path, mcp=True, allowed_hosts=("Memsvc.Example.com",), allowed_origins=("https://app.example.com/",)
    )
    try:
        # /mcp follows the same settings, through Envoy and on the MCP server's own port.
        listed = {**MCP_HEADERS, "origin": "https://app.example.com"}
        assert stack.send("POST", "/mcp", listed, MCP_LIST, host="memsvc.example.com")[0] == 200
        assert stack.send("POST", "/mcp", MCP_HEADERS, MCP_LIST, host="other.example.com")[0] == 403
        assert stack.send("GET", f"/api/memory?apiKeyId={OWNER}", host="memsvc.example.com")[0] == 200
        assert stack.send("GET", f"/api/memory?apiKeyId={OWNER}", host="memsvc.example.com:443")[0] == 200
        same = {**JSON, "origin": "https://memsvc.example.com"}
        assert stack.send("POST", "/api/memory", same, CREATE, host="memsvc.example.com")[0] == 200
        listed = {**JSON, "origin": "https://app.example.com"}
        # Another text: the same one again would be merged into the first (one memory).
        from_app = json.dumps({"apiKeyId": OWNER, "content": "written by the listed app"}).encode()
        assert stack.send("POST", "/api/memory", listed, from_app)[0] == 200
        assert stack.send("GET", f"/api/memory?apiKeyId={OWNER}", host="other.example.com")[0] == 403
        assert stack.send("POST", "/api/memory", {**JSON, "origin": "https://evil.example"}, CREATE)[0] == 403
        assert stack.send("POST", "/api/memory", {**JSON, "origin": "http://app.example.com"}, CREATE)[0] == 403
        assert len(stack.stored()) == 2
    finally:
        stack.stop()


def test_a_public_bind_accepts_any_host_name_but_no_foreign_origin(tmp_path):
    """A public bind needs tokens, which no web page holds: any name reaches it (DNS names,
    load balancers), unless MEMSVC_ALLOWED_HOSTS lists them."""
    stack = Stack(tmp_path, rest_host="0.0.0.0", api_tokens=("origin-token",))
    try:
        assert stack.send("GET", f"/api/memory?apiKeyId={OWNER}", host="memsvc.internal:8080")[0] == 200
        assert stack.send("GET", f"/api/memory?apiKeyId={OWNER}", host="127.0.0.1:1@evil.example")[0] == 403
        status, _ = stack.send(
            "POST", "/api/memory", {**JSON, "origin": "http://evil.example"}, CREATE, host="memsvc.internal:8080"
        )
        assert status == 403
        assert stack.stored() == []
    finally:
        stack.stop()


@pytest.mark.parametrize(
    "overrides",
    [
        {"allowed_hosts": ("http://memsvc.example.com",)},
        {"allowed_hosts": ("memsvc.example.com:8080",)},
        {"allowed_hosts": ("user@memsvc.example.com",)},
        {"allowed_origins": ("app.example.com",)},
        {"allowed_origins": ("https://app.example.com/path",)},
        {"allowed_origins": ("ftp://app.example.com",)},
        {"allowed_origins": ("https://user@app.example.com",)},
    ],
)
def test_a_malformed_allowed_host_or_origin_refuses_to_start(tmp_path, overrides):
    with pytest.raises(ConfigError, match="MEMSVC_ALLOWED_"):
        Config(data_dir=tmp_path, **overrides).validate()
