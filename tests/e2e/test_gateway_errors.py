"""Errors Envoy produces itself use the same JSON body shape as the service's errors."""

from __future__ import annotations

import pytest

from conftest import Rest, make_config, start_gateway, start_server

pytestmark = pytest.mark.e2e


def test_malformed_json_is_a_json_400(rest):
    status, body = rest.call("POST", "/api/memory", raw=b'{"apiKeyId": "k", "content": ')
    assert status == 400 and body["code"] == 3 and body["message"], body


def test_wrong_json_type_is_a_json_400(rest):
    status, body = rest.call("POST", "/api/memory", {"apiKeyId": "k", "content": "x", "expiresAt": "tomorrow"})
    assert status == 400 and body["code"] == 3, body


def test_upstream_down_is_a_json_503(tmp_path):
    handle = start_server(make_config(tmp_path))
    gateway = start_gateway(handle)
    try:
        client = Rest(f"http://127.0.0.1:{gateway.settings.listen_port}")
        assert client.call("GET", "/api/memory/health")[0] == 200
        handle.stop()
        status, body = client.call("GET", "/api/memory/health")
        assert status == 503 and body["code"] == 14 and body["message"], body
    finally:
        gateway.stop()
