"""Through the real Envoy: writing a character's chat needs `character:<name>` among the
token's tenants (the chat turns become that owner's memories); a refused append or save is
403 with the PERMISSION_DENIED reason and stores nothing, the covering token still works."""

from __future__ import annotations

import urllib.parse

import pytest
from conftest import Rest, make_config, start_gateway, start_server

pytestmark = pytest.mark.e2e

ADMIN = "env-admin-token"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


@pytest.fixture
def gateway(tmp_path):
    handle = start_server(make_config(tmp_path, api_tokens=(ADMIN,), recent_flush_s=3600.0))
    gateway = start_gateway(handle)
    try:
        yield handle, f"http://127.0.0.1:{gateway.settings.listen_port}"
    finally:
        gateway.stop()
        handle.stop()


def _denied(status: int, body: dict) -> None:
    assert status == 403 and body["code"] == 7, body
    assert "'character:Mia'" in body["message"]
    assert [d["reason"] for d in body["details"] if d["@type"] == ERROR_INFO] == ["PERMISSION_DENIED"]


def _file(admin: Rest) -> tuple[int, dict]:
    return admin.call("GET", "/api/memory/recent_file?" + urllib.parse.urlencode({"filename": "recent_Mia.json"}))


def test_character_writes_over_rest_need_the_characters_owner(gateway):
    handle, base = gateway
    admin = Rest(base, ADMIN)
    token = lambda name, tenants: Rest(
        base,
        handle.app.credentials.create(  # noqa: E731
            name, ["read:memory", "write:memory"], tenants, True
        ).token,
    )
    other, mia = token("other", ["character:Other"]), token("mia", ["character:Mia"])
    append = {"character": "Mia", "messages": [{"role": "human", "text": "I love green tea"}]}
    _denied(*other.call("POST", "/api/memory/recent_file/append", append))
    assert _file(admin)[0] == 404
    assert mia.call("POST", "/api/memory/recent_file/append", append)[0] == 200
    status, snap = _file(admin)
    assert status == 200 and "I love green tea" in snap["content"]
    save = {
        "filename": "recent_Mia.json",
        "fingerprint": snap["fingerprint"],
        "identity_token": snap["identity_token"],
        "chat": [{"role": "human", "text": "rewritten"}],
    }
    _denied(*other.call("POST", "/api/memory/recent_file/save", save))
    assert _file(admin)[1]["content"] == snap["content"]
    status, saved = mia.call("POST", "/api/memory/recent_file/save", save)
    assert status == 200 and saved["success"] is True, saved
