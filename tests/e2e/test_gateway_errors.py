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


# ---- what Envoy checks before the transcoder: URL length and unknown body fields ----------


def _violations(body) -> list[dict]:
    return [v for d in body.get("details", []) for v in d.get("fieldViolations", [])]


def _memories(rest: Rest, api_key_id: str) -> list[dict]:
    status, body = rest.call("GET", f"/api/memory?apiKeyId={api_key_id}")
    assert status == 200, body
    return body["data"]


def test_misspelled_body_field_is_a_400_naming_it_and_stores_nothing(rest):
    status, body = rest.call(
        "POST", "/api/memory", {"apiKeyId": "k", "content": "x", "key": "a", "expiresAT": "2099-01-01T00:00:00Z"}
    )
    assert status == 400 and body["code"] == 3, body
    assert "expiresAT" in body["message"], body
    assert _violations(body) == [{"field": "expiresAT", "description": "unknown field"}], body
    assert _memories(rest, "k") == []


@pytest.mark.parametrize(
    "raw_key,field",
    [("exp\\u0069resAT", "expiresAT"), ("\\u00e9t\\u00e9", "été"), ("\\ud83e\\udde0", "🧠"), ("\\ud83e", "\\ud83e")],
)
def test_unknown_field_is_named_as_decoded_however_the_key_is_escaped(rest, raw_key, field):
    raw = f'{{"apiKeyId":"k","content":"x","{raw_key}":1}}'
    status, body = rest.call("POST", "/api/memory", raw=raw.encode())
    assert status == 400 and _violations(body)[0]["field"] == field, body


@pytest.mark.parametrize(
    "method,path,body,field",
    [
        ("PUT", "/api/memory/some-id", {"content": "x", "colour": "red"}, "colour"),
        ("POST", "/api/characters/catgirl/Mia/rename", {"new_name": "Nia", "nme": "x"}, "nme"),
        ("POST", "/api/memory/update_catgirl_name", {"old_name": "Mia", "new_name": "Nia", "x": 1}, "x"),
        ("POST", "/api/memory/retrieve", {"apiKeyId": "k", "query": "q", "sesionId": "s"}, "sesionId"),
        (
            "POST",
            "/api/memory/inject",
            {"apiKeyId": "k", "request": {"messages": []}, "options": {"bogus": 1}},
            "options.bogus",
        ),
        ("POST", "/api/memory/recent_file/append", {"character": "Mia", "messages": [], "msgs": []}, "msgs"),
        ("POST", "/api/memory/review_config", {"enabled": False, "enable": True}, "enable"),
        ("POST", "/api/credentials", {"id": "agent", "permissions": ["read"], "tenantz": ["a"]}, "tenantz"),
    ],
)
def test_unknown_body_field_is_refused_on_other_routes_too(rest, method, path, body, field):
    status, answer = rest.call(method, path, body)
    assert status == 400 and _violations(answer) == [{"field": field, "description": "unknown field"}], answer


def test_a_misspelled_query_parameter_and_a_misspelled_body_field_are_both_400(rest):
    assert rest.call("GET", "/api/memory?apiKeyID=k")[0] == 400
    assert rest.call("POST", "/api/memory/retrieve", {"apiKeyID": "k", "query": "q"})[0] == 400


def test_free_form_objects_and_chat_items_keep_accepting_any_key(rest):
    status, body = rest.call(
        "POST", "/api/memory", {"apiKeyId": "k", "content": "x", "metadata": {"anyKey": {"nested": [{"deep": 1}]}}}
    )
    assert status == 200, body
    status, body = rest.call(
        "POST",
        "/api/memory/recent_file/append",
        {"character": "Mia", "messages": [{"role": "human", "text": "hi", "timestamp": 1, "data": {"x": 1}}]},
    )
    assert status == 200 and body["accepted"] == 1, body
    status, body = rest.call(
        "POST",
        "/api/memory/inject",
        {
            "apiKeyId": "k",
            "request": {"model": "m", "messages": [{"role": "user", "content": "hi", "name": "n"}], "temperature": 0.2},
        },
    )
    assert status == 200, body


def test_unknown_field_after_a_large_body_is_still_found(rest):
    big = {"filename": "recent_Mia.json", "chat": [{"role": "human", "text": "x" * 30_000}] * 100}
    status, body = rest.call("POST", "/api/memory/recent_file/save", {**big, "bogus": 1})
    assert status == 400 and _violations(body)[0]["field"] == "bogus", body


def test_url_over_the_limit_is_414_with_a_json_body(rest):
    status, body = rest.call("GET", "/api/memory/" + "a" * 9000)
    assert status == 414 and body["code"] == 8 and "8192" in body["message"], body
    status, body = rest.call("GET", "/api/memory?apiKeyId=k&q=" + "a" * 8200)
    assert status == 414, body


def test_url_at_the_limit_reaches_memsvc(rest):
    path = "/api/memory?apiKeyId=k&q="
    status, body = rest.call("GET", path + "a" * (8192 - len(path)))
    assert status == 400 and body["message"].startswith("q:"), body  # memsvc's own limit on q


def test_large_headers_reach_memsvc_not_resource_exhausted(rest):
    status, body = rest.call("GET", "/api/memory/health", headers={"x-pad": "p" * 30_000})
    assert status == 200 and body["working"], body


def test_headers_over_the_limit_are_431_with_a_json_body(rest):
    status, body = rest.call("GET", "/api/memory/health", headers={"x-pad": "p" * 40_000})
    assert status == 431 and body["code"] == 8, body


def test_a_client_cannot_spoof_the_guard_marker(rest):
    status, body = rest.call("GET", "/api/nothing-here", headers={"x-memsvc-guard": "1"})
    assert status == 404 and body["code"] == 5, body


def test_a_bad_te_header_does_not_break_later_requests(rest):
    """A client's `te` reached the gRPC server on a request passed through as gRPC, and from
    then on requests of every client on the shared upstream connection were 500."""
    for _ in range(2):
        rest.call("POST", "/api/memory", raw=b"{}", headers={"content-type": "application/grpc", "te": ""})
    statuses = [
        rest.call("GET", "/api/memory/health", headers={"x-pad": "p" * size})[0]
        for size in (10, 1000, 9000)
        for _ in range(4)
    ]
    assert statuses == [200] * len(statuses)


@pytest.mark.parametrize("request_id", ["\x80", "caf\xe9", "a\tb", "r" * 129])
def test_a_request_id_grpc_cannot_send_back_is_replaced_not_a_500(rest, request_id):
    """An error echoes the request id in its trailers; one gRPC cannot send made the answer
    a 500 instead of the error."""
    status, body = rest.call("POST", "/api/memory", {"apiKeyId": "k"}, headers={"x-request-id": request_id})
    assert status == 400 and body["message"].startswith("content:"), body


# Brackets, quotes and backslashes inside strings of a free-form object, which the guard
# skips without parsing: the body's own fields after it are still checked, and nothing in it
# is taken for a field.
_TRICKY_METADATA = b'{"a": "x\\"}{[", "b": ["\\\\", {"c": "]\\\\\\""}], "\\"bogus\\"": {"d": "}"}, "e": "\\\\"}'


def test_strings_inside_free_form_objects_cannot_hide_or_fake_a_field(rest):
    body = b'{"apiKeyId": "k", "content": "x\\\\", "metadata": ' + _TRICKY_METADATA + b', "bogus": 1}'
    status, answer = rest.call("POST", "/api/memory", raw=body)
    assert status == 400 and _violations(answer)[0]["field"] == "bogus", answer
    body = b'{"apiKeyId": "k", "content": "x", "metadata": ' + _TRICKY_METADATA + b', "key": "k1"}'
    status, answer = rest.call("POST", "/api/memory", raw=body)
    assert status == 200, answer
