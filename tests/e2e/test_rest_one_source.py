"""One source for each field of a REST request, through the real Envoy and server: a field
the path binds may not come again in the query or the body, nor a query field again in the
body, nor any field twice in the query or in one JSON object, in either spelling (the
transcoder lets the last one win: `DELETE /api/memory/A?id=B` deleted B while the access log
showed A). Every route is covered from the route templates; each refusal is 400 naming the
field and changes nothing. A repeated field may be given as often as it has values."""

from __future__ import annotations

import re
import urllib.parse

import pytest
from conftest import Rest, make_config, start_gateway, start_server
from google.protobuf import descriptor_pool
from test_rest_fuzz import ROUTES, Route

from memsvc.gateway.request_guard import path_fields

pytestmark = pytest.mark.e2e
TOKEN = "one-source-admin"


@pytest.fixture(scope="module")
def rest(tmp_path_factory):
    handle = start_server(make_config(tmp_path_factory.mktemp("one-source"), api_tokens=(TOKEN,)))
    gateway = start_gateway(handle)
    yield Rest(f"http://127.0.0.1:{gateway.settings.listen_port}", token=TOKEN)
    gateway.stop()
    handle.stop()


def _spellings(route: Route, proto_path: str) -> list[str]:
    """The names a query string or body may use for a field: its proto and JSON names."""
    field = descriptor_pool.Default().FindMethodByName(route.rpc).input_type.fields_by_name[proto_path]
    return sorted({field.name, field.json_name})


PATH_BOUND = [(r, var, name) for r in ROUTES for var in path_fields(r.template) for name in _spellings(r, var)]


def _target(route: Route, query: dict[str, str] | None = None) -> str:
    path = re.sub(r"\{[^}]*\}", "path-value", route.template)
    return path + ("?" + urllib.parse.urlencode(query) if query else "")


def _refused(status: int, body: dict, name: str) -> None:
    assert status == 400 and body["code"] == 3, body
    assert "give each field once" in body["message"] and name in body["message"], body
    violations = [v for d in body.get("details", []) for v in d.get("fieldViolations", [])]
    assert violations == [{"field": name, "description": "given more than once"}], body


def _state(rest: Rest) -> list[dict]:
    status, body = rest.call("GET", "/api/memory?limit=200")
    assert status == 200, body
    return body["data"]


@pytest.mark.parametrize("route,var,name", PATH_BOUND, ids=[f"{r.method} {r.template} ?{n}" for r, _, n in PATH_BOUND])
def test_a_path_field_given_again_in_the_query_is_a_400(rest, route, var, name):
    before = _state(rest)
    body = {} if route.has_body else None
    status, answer = rest.call(route.method, _target(route, {name: "query-value"}), body)
    _refused(status, answer, name)
    assert _state(rest) == before


BODY_BOUND = [(r, var, name) for r, var, name in PATH_BOUND if r.has_body]


@pytest.mark.parametrize(
    "route,var,name", BODY_BOUND, ids=[f"{r.method} {r.template} {{{n}}}" for r, _, n in BODY_BOUND]
)
def test_a_path_field_given_again_in_the_body_is_a_400(rest, route, var, name):
    before = _state(rest)
    status, answer = rest.call(route.method, _target(route), {name: "body-value"})
    _refused(status, answer, name)
    assert _state(rest) == before


def test_delete_with_another_id_in_the_query_deletes_neither(rest):
    ids = [rest.call("POST", "/api/memory", {"apiKeyId": "one-source", "content": c})[1]["id"] for c in ("A", "B")]
    status, answer = rest.call("DELETE", f"/api/memory/{ids[0]}?id={ids[1]}")
    _refused(status, answer, "id")
    status, answer = rest.call("PUT", f"/api/memory/{ids[0]}", {"id": ids[1], "content": "changed"})
    _refused(status, answer, "id")
    for memory_id, content in zip(ids, ("A", "B")):
        status, got = rest.call("GET", f"/api/memory/{memory_id}")
        assert status == 200 and got["content"] == content, got
    # One source is served: the path's.
    assert rest.call("DELETE", f"/api/memory/{ids[0]}")[0] == 200
    assert rest.call("GET", f"/api/memory/{ids[1]}")[0] == 200


@pytest.mark.parametrize(
    "query,body,name",
    [
        ({"apiKeyId": "from-query"}, {"apiKeyId": "from-body", "content": "c"}, "apiKeyId"),
        ({"api_key_id": "from-query"}, {"apiKeyId": "from-body", "content": "c"}, "api_key_id"),
        ({"content": "from-query"}, {"api_key_id": "k", "content": "from-body"}, "content"),
    ],
)
def test_a_query_field_given_again_in_the_body_is_a_400(rest, query, body, name):
    before = _state(rest)
    status, answer = rest.call("POST", "/api/memory?" + urllib.parse.urlencode(query), body)
    _refused(status, answer, name)
    assert _state(rest) == before


def test_fields_from_different_sources_are_served(rest):
    """The query names fields the body leaves out, the path its own: served."""
    status, created = rest.call("POST", "/api/memory?apiKeyId=one-source-ok", {"content": "from two sources"})
    assert status == 200, created
    status, got = rest.call("GET", f"/api/memory/{created['id']}")
    assert got["apiKeyId"] == "one-source-ok" and got["content"] == "from two sources"
    status, updated = rest.call("PUT", f"/api/memory/{created['id']}", {"content": "updated"})
    assert status == 200, updated
    assert rest.call("GET", f"/api/memory/{created['id']}")[1]["content"] == "updated"


@pytest.mark.parametrize(
    "query,name,methods",
    [
        ("apiKeyId=a&apiKeyId=b", "apiKeyId", ("GET", "DELETE")),
        ("apiKeyId=a&api_key_id=b", "api_key_id", ("GET", "DELETE")),
        ("api_key_id=a&apiKeyId=a", "apiKeyId", ("GET", "DELETE")),
        ("apiKeyId=a&api%4BeyId=b", "apiKeyId", ("GET", "DELETE")),
        ("apiKeyId=a&limit=1&limit=1", "limit", ("GET",)),
        ("apiKeyId=a&q=x&q=", "q", ("GET",)),
    ],
)
def test_a_field_twice_in_the_query_is_a_400(rest, query, name, methods):
    rest.call("POST", "/api/memory", {"apiKeyId": "a", "content": "kept"})
    for method in methods:
        status, answer = rest.call(method, f"/api/memory?{query}")
        _refused(status, answer, name)
        assert "twice in the query" in answer["message"]
    assert [m["content"] for m in _state(rest) if m["apiKeyId"] == "a"] == ["kept"]
    rest.call("DELETE", "/api/memory?apiKeyId=a")


@pytest.mark.parametrize(
    "raw,name",
    [
        (b'{"apiKeyId": "dup", "apiKeyId": "other", "content": "c"}', "apiKeyId"),
        (b'{"apiKeyId": "dup", "api_key_id": "other", "content": "c"}', "api_key_id"),
        (b'{"api_key_id": "dup", "content": "c", "apiKeyId": "dup"}', "apiKeyId"),
        (b'{"apiKeyId": "dup", "content": "c", "metadata": {"a": 1, "a": 2}}', "metadata.a"),
        (b'{"apiKeyId": "dup", "content": "c", "metadata": {"a": {"b": 1, "b": 1}}}', "metadata.a.b"),
        (b'{"apiKeyId": "dup", "content": "c", "expiresAt": "2099-01-01T00:00:00Z", "expires_at": null}', "expires_at"),
    ],
)
def test_a_field_twice_in_a_json_object_is_a_400(rest, raw, name):
    before = _state(rest)
    status, answer = rest.call("POST", "/api/memory", raw=raw)
    _refused(status, answer, name)
    assert "twice in the request body" in answer["message"]
    assert _state(rest) == before


def test_a_field_twice_in_a_batch_item_refuses_the_batch(rest):
    before = _state(rest)
    raw = (
        b'{"memories": [{"apiKeyId": "dup", "content": "one"},'
        b' {"apiKeyId": "dup", "content": "two", "content": "three"}]}'
    )
    status, answer = rest.call("POST", "/api/memory/batch", raw=raw)
    _refused(status, answer, "memories.content")
    assert _state(rest) == before


def test_a_repeated_field_may_come_once_per_value(rest):
    """`permissions` is a list: the query may give it once for each value."""
    status, created = rest.call(
        "POST",
        "/api/credentials?permissions=read:memory&permissions=write:memory",
        {"id": "repeated-ok", "tenants": ["t"]},
    )
    assert status == 200, created
    status, listed = rest.call("GET", "/api/credentials")
    mine = [c for c in listed["credentials"] if c["id"] == "repeated-ok"]
    assert sorted(mine[0]["permissions"]) == ["read:memory", "write:memory"], mine
