"""Hostile REST input through the real Envoy: bytes the transcoder passes on but gRPC cannot
decode, gRPC's own headers sent by a REST client, and JSON nested too deep. Each is a 401
without a token and a 400 (or served) with one; never a 500, and nothing is stored."""

from __future__ import annotations

import http.client
import json

import pytest
from conftest import Rest, make_config, start_gateway, start_server

pytestmark = pytest.mark.e2e

TOKEN = "rest-malformed-token"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    handle = start_server(make_config(tmp_path_factory.mktemp("rest-malformed"), api_tokens=(TOKEN,)))
    gw = start_gateway(handle)
    yield gw.settings.listen_port
    gw.stop()
    handle.stop()


@pytest.fixture
def anonymous(gateway) -> Rest:
    return Rest(f"http://127.0.0.1:{gateway}")


@pytest.fixture
def client(gateway) -> Rest:
    return Rest(f"http://127.0.0.1:{gateway}", token=TOKEN)


def _get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict]:
    """A GET whose headers go out byte for byte (urllib would refuse some of them)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


@pytest.mark.parametrize(
    "path,field",
    [("/api/memory?apiKeyId=%ff", "apiKeyId"), ("/api/memory/%ff%fe", "id"), ("/api/memory?apiKeyId=k&q=%c3%28", "q")],
)
def test_bytes_that_are_not_utf8_are_401_then_400(anonymous, client, path, field):
    status, body = anonymous.call("GET", path)
    assert status == 401 and body["code"] == 16, body
    status, body = client.call("GET", path)
    assert status == 400 and body["code"] == 3, body
    assert body["message"] == f"{field}: is not valid UTF-8" and "DecodeError" not in json.dumps(body)


@pytest.mark.parametrize(
    "header",
    [
        "x-trace-bin: ###",
        "x-trace-bin: AAAA",
        "grpc-trace-bin: YWJj",
        "authorization-bin: %%",
        "grpc-timeout: soon",
        "grpc-encoding: bogus",
        "grpc-previous-rpc-attempts: x",
    ],
)
def test_grpc_headers_from_a_rest_client_never_make_a_500(gateway, header):
    name, value = header.split(": ", 1)
    for _ in range(5):
        assert _get(gateway, "/api/memory?apiKeyId=k", {name: value})[0] == 401
        status, body = _get(gateway, "/api/memory?apiKeyId=k", {name: value, "authorization": f"Bearer {TOKEN}"})
        assert status == 200 and body["total"] == 0, body


def _nested(depth: int) -> dict:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value  # type: ignore[return-value]


def test_metadata_32_levels_deep_is_stored_and_served(client):
    status, created = client.call(
        "POST", "/api/memory", {"apiKeyId": "deep-ok", "content": "c", "metadata": _nested(32)}
    )
    assert status == 200, created
    status, got = client.call("GET", f"/api/memory/{created['id']}")
    assert status == 200 and got["metadata"] == _nested(32), got
    status, listed = client.call("GET", "/api/memory?apiKeyId=deep-ok")
    assert status == 200 and listed["data"][0]["metadata"] == _nested(32)


@pytest.mark.parametrize("depth", [33, 34, 50, 98])
def test_metadata_deeper_than_32_levels_is_a_400_naming_the_field(anonymous, client, depth):
    payload = {"apiKeyId": "deep-no", "content": "c", "metadata": _nested(depth)}
    assert anonymous.call("POST", "/api/memory", payload)[0] == 401
    status, body = client.call("POST", "/api/memory", payload)
    assert status == 400 and body["code"] == 3, body
    assert body["message"] == "metadata: is nested deeper than 32 levels of objects and arrays", body
    assert client.call("GET", "/api/memory?apiKeyId=deep-no")[1]["total"] == 0


# Bodies the transcoder's lenient JSON parser reads, each hiding an unknown field
# (`expiresAT`, which it would drop: a memory that never expires) or otherwise not JSON.
NOT_STRICT_JSON = {
    "form feed first": b'\x0c{"apiKeyId": "lenient", "content": "c", "expiresAT": 1}',
    "vertical tab first": b'\x0b{"apiKeyId": "lenient", "content": "c", "expiresAT": 1}',
    "form feed between": b'{"apiKeyId": "lenient",\x0c"content": "c", "expiresAT": 1}',
    "no-break space": b'{"apiKeyId": "lenient",\xc2\xa0"content": "c"}',
    "single-quoted keys": b"{'apiKeyId': 'lenient', 'content': 'c', 'expiresAT': 1}",
    "single-quoted value": b'{"apiKeyId": "lenient", "content": \'c", "expiresAT": 1, "x": "\'}',
    "unquoted keys": b'{apiKeyId: "lenient", content: "c", expiresAT: 1}',
    "trailing comma": b'{"apiKeyId": "lenient", "content": "c",}',
    "trailing content": b'{"apiKeyId": "lenient", "content": "c"} {"expiresAT": 1}',
    "comment": b'{"apiKeyId": "lenient", /* x */ "content": "c"}',
    "byte order mark": b'\xef\xbb\xbf{"apiKeyId": "lenient", "content": "c"}',
    "bare word value": b'{"apiKeyId": "lenient", "content": "c", "keep": True}',
    "leading zero": b'{"apiKeyId": "lenient", "content": "c", "importance": 01}',
    "plus sign": b'{"apiKeyId": "lenient", "content": "c", "importance": +1}',
    "hex number": b'{"apiKeyId": "lenient", "content": "c", "importance": 0x1}',
    "bare dot": b'{"apiKeyId": "lenient", "content": "c", "importance": .5}',
    "NaN in metadata": b'{"apiKeyId": "lenient", "content": "c", "metadata": {"a": NaN}}',
    "single quotes in metadata": b'{"apiKeyId": "lenient", "content": "c", "metadata": {\'a"\': 1}, "expiresAT": 1}',
    "unknown escape in a key": b'{"api\\KeyId": "lenient", "content": "c"}',
    "bad unicode escape in a key": b'{"apiKeyId\\u00": "lenient", "content": "c"}',
    "control character in a key": b'{"apiKey\x01Id": "lenient", "content": "c"}',
    "mismatched brackets": b'{"apiKeyId": "lenient", "content": "c", "metadata": {"a": [1}]}',
    "missing colon": b'{"apiKeyId" "lenient", "content": "c"}',
}


@pytest.mark.parametrize("body", NOT_STRICT_JSON.values(), ids=NOT_STRICT_JSON.keys())
def test_a_body_that_is_not_strict_json_is_a_400_and_stores_nothing(client, body):
    status, answer = client.call("POST", "/api/memory", raw=body)
    assert status == 400 and answer["code"] == 3, answer
    assert "not strict JSON" in answer["message"] or "unknown field" in answer["message"], answer
    assert client.call("GET", "/api/memory?apiKeyId=lenient")[1]["total"] == 0


def test_strict_json_in_every_spelling_is_served(client):
    """What strict JSON allows: tabs, line breaks, escapes in keys, exponents, nesting."""
    body = (
        b'\r\n\t {"api\\u004beyId"\t:\n"strict-ok", "content" : "it\'s \\"fine\\" \\u00e9",'
        b' "metadata": {"n": [-0.5e+3, 0, 1E2, true, false, null, {}, []], "\\ud83e\\udde0": "x"}}\r\n'
    )
    status, created = client.call("POST", "/api/memory", raw=body)
    assert status == 200, created
    status, got = client.call("GET", f"/api/memory/{created['id']}")
    assert got["apiKeyId"] == "strict-ok" and got["metadata"]["n"][0] == -500 and "🧠" in got["metadata"]
