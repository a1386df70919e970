"""OAuth through the real Envoy: the Protected Resource Metadata (RFC 9728) Envoy serves, the
WWW-Authenticate challenge on 401s of REST and /mcp, JWT access tokens of a real
authorization server on loopback (tests/support/oauth_server.py, authlib) over REST and
/mcp, and the MCP SDK's own OAuth client (mcp.client.auth) completing authorization code +
PKCE against that server and then calling tools through Envoy."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import jwt
import pytest
from conftest import Rest, free_port, make_config, start_server
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from support.oauth_server import Client as RegisteredClient
from support.oauth_server import OAuthServer

from memsvc.gateway.launcher import Gateway
from memsvc.mcp.http import McpHttp
from memsvc.v1 import memory_pb2 as mpb

pytestmark = pytest.mark.e2e
ADMIN_TOKEN = "oauth-gateway-admin"
REDIRECT = "http://127.0.0.1:9/callback"  # never reached: the test reads the redirect itself


class Stack:
    """An authorization server, memsvc with OAuth configured, its MCP HTTP server and Envoy."""

    def __init__(self, tmp_path):
        self.idp = OAuthServer.start()
        rest_port = free_port()
        self.audience = f"http://127.0.0.1:{rest_port}"
        self.server = start_server(
            make_config(
                tmp_path,
                api_tokens=(ADMIN_TOKEN,),
                mcp_port=0,
                rest_port=rest_port,
                oauth_issuer=self.idp.issuer,
                oauth_audience=self.audience,
                oauth_jwks_refresh_s=0.0,
            )
        )
        self.mcp = self._in_loop(McpHttp.start(self.server.config, self.server.port))
        conf = replace(self.server.config, mcp_port=self.mcp.port)
        self.gateway = Gateway.for_config(conf, grpc_port=self.server.port)
        self.gateway.start()
        self.base = self.audience
        self.url = f"{self.base}/mcp"

    def _in_loop(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.server.loop).result(60)

    def token(self, scope: str, tenants, **extra) -> str:
        return self.idp.sign(self.idp.claims(self.audience, scope, tenants, **extra))

    def count(self, tenant: str) -> int:
        return self.server.stubs(ADMIN_TOKEN).memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=tenant)).total

    def stop(self):
        self.gateway.stop()
        self._in_loop(self.mcp.stop())
        self.server.stop()
        self.idp.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    running = Stack(tmp_path_factory.mktemp("oauth-gateway"))
    yield running
    running.stop()


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


def _post_mcp(url: str, token: str | None) -> tuple[int, dict[str, str], bytes]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(message).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


def _header(headers: dict[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name), None)


def test_envoy_serves_the_protected_resource_metadata(stack):
    expected = {
        "resource": stack.audience,
        "authorization_servers": [stack.idp.issuer],
        "scopes_supported": ["read:memory", "write:memory", "admin"],
        "bearer_methods_supported": ["header"],
    }
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        status, headers, body = _get(stack.base + path)
        assert status == 200 and _header(headers, "content-type") == "application/json", path
        assert json.loads(body) == expected


def test_unauthenticated_requests_get_the_challenge(stack):
    prm = f"{stack.base}/.well-known/oauth-protected-resource"
    status, headers, _ = _post_mcp(stack.url, None)
    assert status == 401
    assert _header(headers, "www-authenticate") == f'Bearer resource_metadata="{prm}/mcp"'
    status, headers, _ = _post_mcp(stack.url, stack.token("read:memory", ["alice"], exp=int(time.time()) - 300))
    assert status == 401
    assert _header(headers, "www-authenticate") == f'Bearer error="invalid_token", resource_metadata="{prm}/mcp"'
    status, headers, body = _get(f"{stack.base}/api/memory?apiKeyId=alice")
    assert status == 401 and json.loads(body)["code"] == 16
    assert _header(headers, "www-authenticate") == f'Bearer resource_metadata="{prm}"'
    status, headers, body = _get(
        f"{stack.base}/api/memory?apiKeyId=alice", {"authorization": f"Bearer {stack.idp.unsigned({'sub': 'x'})}"}
    )
    assert status == 401 and "invalid access token" in json.loads(body)["message"]
    assert _header(headers, "www-authenticate") == f'Bearer error="invalid_token", resource_metadata="{prm}"'


def test_rest_with_access_tokens(stack):
    writer = Rest(stack.base, stack.token("read:memory write:memory", ["alice"]))
    status, made = writer.call("POST", "/api/memory", {"apiKeyId": "alice", "content": "drinks oolong"})
    assert status == 200 and made["success"] is True
    status, listed = writer.call("GET", "/api/memory?apiKeyId=alice")
    assert status == 200 and listed["total"] == stack.count("alice") >= 1
    before = stack.count("bob")
    assert writer.call("POST", "/api/memory", {"apiKeyId": "bob", "content": "x"})[0] == 403
    assert writer.call("GET", "/api/settings/memory")[0] == 403
    assert stack.count("bob") == before
    for bad in (
        stack.token("write:memory", ["alice"], exp=int(time.time()) - 300),
        stack.idp.sign(stack.idp.claims("http://127.0.0.1:1", "write:memory", ["alice"])),
        stack.idp.sign(stack.idp.claims(stack.audience, "write:memory", ["alice"], iss="http://127.0.0.1:2")),
        stack.idp.unsigned(stack.idp.claims(stack.audience, "admin")),
        stack.idp.hs256_with_public_key(stack.idp.claims(stack.audience, "admin")),
    ):
        before = stack.count("alice")
        status, _ = Rest(stack.base, bad).call("POST", "/api/memory", {"apiKeyId": "alice", "content": "no"})
        assert status == 401
        assert stack.count("alice") == before


def test_mcp_with_an_access_token(stack):
    token = stack.token("read:memory write:memory", ["mcp-tenant"])
    status, _, body = _post_mcp(stack.url, token)
    assert status == 200 and "memory_add" in body.decode()


class _Memory:
    """The SDK's TokenStorage: the client registered with the server in advance."""

    def __init__(self, client: OAuthClientInformationFull):
        self.client = client
        self.tokens: OAuthToken | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def test_the_sdk_oauth_client_completes_the_flow_and_calls_tools(stack):
    stack.idp.clients["agent"] = RegisteredClient("agent", [REDIRECT], scope="read:memory write:memory")
    stack.idp.user.tenants = ["sdk-tenant"]
    metadata = OAuthClientMetadata(
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope="read:memory write:memory",
    )
    storage = _Memory(OAuthClientInformationFull(client_id="agent", **metadata.model_dump()))
    redirected: list[str] = []

    async def redirect_handler(url: str) -> None:
        # The user's browser: the server consents at once and redirects with the code.
        async with httpx2.AsyncClient() as browser:
            answer = await browser.get(url)
        assert answer.status_code == 302, answer.text
        redirected.append(answer.headers["location"])

    async def callback_handler() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(redirected[-1]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0])

    auth = OAuthClientProvider(stack.url, metadata, storage, redirect_handler, callback_handler)

    async def main():
        async with (
            create_mcp_http_client(auth=auth) as http,
            Client(streamable_http_client(stack.url, http_client=http)) as client,
        ):
            added = await client.call_tool(
                "memory_add", {"content": "prefers tea", "apiKeyId": "sdk-tenant", "type": "factual"}
            )
            assert not added.is_error, added.content
            listed = await client.call_tool("memory_list", {"apiKeyId": "sdk-tenant"})
            assert not listed.is_error and "prefers tea" in listed.content[0].text
            denied = await client.call_tool("memory_list", {"apiKeyId": "other-tenant"})
            assert denied.is_error

    anyio.run(main)
    assert redirected and storage.tokens is not None
    issued = stack.idp.issued[-1]
    assert issued["scope"] == "read:memory write:memory"
    assert stack.idp.challenge_methods[-1] == "S256"
    # RFC 8707: the SDK asked for the resource the metadata names, and the token says so.
    claims = jwt.decode(issued["access_token"], options={"verify_signature": False})
    assert claims["aud"] == stack.audience and claims["memsvc_tenants"] == ["sdk-tenant"]
    assert stack.count("sdk-tenant") == 1
