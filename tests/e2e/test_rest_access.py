"""The access matrix through the real Envoy: every RPC's REST route with each kind of
caller answers the policy's HTTP status (401, 403, 404, 200), and a refused call changes
nothing. Also the credential routes themselves."""

from __future__ import annotations

import pytest
from conftest import Rest, make_config, start_gateway, start_server
from support.access_matrix import World, describe, rest_call, run_matrix


@pytest.fixture(scope="module")
def gateway_world(tmp_path_factory):
    handle = start_server(
        make_config(tmp_path_factory.mktemp("rest-matrix"), recent_flush_s=3600.0, access_flush_s=0.0)
    )
    gateway = start_gateway(handle)
    try:
        yield handle, Rest(f"http://127.0.0.1:{gateway.settings.listen_port}")
    finally:
        gateway.stop()
        handle.stop()


def test_the_access_matrix_through_envoy(gateway_world):
    handle, rest = gateway_world
    world = World.build(handle)
    problems = run_matrix(world, lambda path, method, request, token: rest_call(rest, method, request, token))
    assert problems == [], describe(problems)


def test_an_admin_manages_credentials_over_rest(gateway_world):
    handle, rest = gateway_world
    admin = Rest(rest.base, handle.app.credentials.create("rest-admin", ["admin"], [], False).token)
    status, made = admin.call(
        "POST", "/api/credentials", {"id": "rest-agent", "permissions": ["read:memory"], "tenants": ["R1"]}
    )
    assert status == 200 and made["success"] is True
    assert made["credential"]["tenants"] == ["R1"] and made["token"].startswith("msk_")
    agent = Rest(rest.base, made["token"])
    assert agent.call("GET", "/api/memory?apiKeyId=R1")[0] == 200
    assert agent.call("GET", "/api/memory?apiKeyId=R2")[0] == 403
    assert agent.call("GET", "/api/credentials")[0] == 403
    status, listing = admin.call("GET", "/api/credentials")
    assert status == 200
    assert {c["id"] for c in listing["credentials"]} >= {"rest-admin", "rest-agent"}
    fields = {"id", "permissions", "tenants", "characters", "createdAt"}
    assert all(fields <= set(c) <= fields | {"revokedAt"} for c in listing["credentials"]), listing
    assert "msk_" not in str(listing)
    assert (
        admin.call("POST", "/api/credentials", {"id": "rest-agent", "permissions": ["read:memory"], "tenants": ["R1"]})[
            0
        ]
        == 409
    )
    status, body = admin.call("POST", "/api/credentials", {"id": "bad id!", "permissions": ["root"]})
    assert status == 400 and "permissions" in body["message"] and "id" in body["message"]
    status, revoked = admin.call("DELETE", "/api/credentials/rest-agent")
    assert status == 200 and revoked["credential"]["revokedAt"]
    assert agent.call("GET", "/api/memory?apiKeyId=R1")[0] == 401
    assert admin.call("DELETE", "/api/credentials/nobody")[0] == 404
