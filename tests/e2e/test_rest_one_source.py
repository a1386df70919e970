"""One source for each field of a REST request, through the real Envoy and server: a field
the path binds may not come again in the query or the body, nor a query field again in the
body (the transcoder lets the last one win: `DELETE /api/memory/A?id=B` deleted B while the
access log showed A). Every route is covered from the route templates; each refusal is 400
naming the field and changes nothing."""

from __future__ import annotations

import re
import urllib.parse

import pytest
from google.protobuf import descriptor_pool

from conftest import Rest, start_gateway, start_server, make_config
from memsvc.gateway.request_guard import path_fields
from test_rest_fuzz import ROUTES, Route

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def rest(tmp_path_factory):
    handle = start_server(make_config(tmp_path_factory.mktemp("one-source")))
    gateway = start_gateway(handle)
    yield Rest(f"http://127.0.0.1:{gateway.settings.listen_port}")
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


@pytest.mark.parametrize("route,var,name", BODY_BOUND, ids=[f"{r.method} {r.template} {{{n}}}" for r, _, n in BODY_BOUND])
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


@pytest.mark.parametrize("query,body,name", [
    ({"apiKeyId": "from-query"}, {"apiKeyId": "from-body", "content": "c"}, "apiKeyId"),
    ({"api_key_id": "from-query"}, {"apiKeyId": "from-body", "content": "c"}, "api_key_id"),
    ({"content": "from-query"}, {"api_key_id": "k", "content": "from-body"}, "content"),
])
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
