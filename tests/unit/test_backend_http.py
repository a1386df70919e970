"""The generic HTTP backend against a real loopback REST memory API: health (ok, HTTP 500,
network error, timeout, latency), initialize (ok, fail), create (default and custom
endpoint), get (ok, 404 → None, other errors raise, renamed path parameter), update and
delete (ok, 404), list (query parameters, renamed parameters), search (query parameters,
custom endpoint, options serialised as JSON), auth (bearer key, custom headers), the
factory's defaults, and the outbound URL policy on every call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support.fake_memory_api import FakeMemoryApi

from memsvc.backends import create_backend
from memsvc.backends.http import HttpBackend
from memsvc.kernel.backend import BackendError, BackendSearch
from memsvc.kernel.models import MemoryFilter, MemoryPatch, NewMemory, SearchScope

KEY = "generic-test-key-98765"


@pytest.fixture
def api() -> Iterator[FakeMemoryApi]:
    with FakeMemoryApi() as server:
        yield server


def backend_for(api: FakeMemoryApi, **config: Any) -> HttpBackend:
    backend = create_backend("generic", {"type": "http", "baseUrl": api.base_url, "apiKey": KEY, **config})
    assert isinstance(backend, HttpBackend)
    return backend


def seed(api: FakeMemoryApi, **fields: Any) -> str:
    now = datetime.now(UTC).isoformat()
    memory = {
        "id": fields.pop("id", "m-1"),
        "apiKeyId": "alice",
        "type": "factual",
        "content": "likes tea",
        "metadata": {},
        "createdAt": now,
        "updatedAt": now,
        **fields,
    }
    api.memories[memory["id"]] = memory
    return memory["id"]


def scope(owner: str = "alice") -> SearchScope:
    now = datetime.now(UTC)
    return SearchScope(api_key_id=owner, now=now, created_after=now - timedelta(days=30))


# ---- constructor / factory ----


def test_factory_builds_an_http_backend_with_the_default_timeout_and_endpoints(api):
    backend = backend_for(api)
    assert backend.name == "generic" and backend.kind == "http"
    assert backend.http.connection.timeout_s == 30.0
    assert (
        backend.config.endpoint("search") == "/memories/search" and backend.config.endpoint("get") == "/memories/{id}"
    )
    assert backend_for(api, timeoutMs=1500).http.connection.timeout_s == 1.5


# ---- health / initialize ----


def test_health_ok_reports_a_measured_latency(api):
    health = backend_for(api).health()
    assert health.ok and health.error == "" and health.latency_ms > 0
    assert api.calls("GET", "/health")


def test_health_http_500_is_unhealthy_with_the_status(api):
    api.fault = "500"
    health = backend_for(api).health()
    assert not health.ok and "HTTP 500" in health.error


def test_health_network_error_is_unhealthy(api):
    backend = backend_for(api)
    api.down()
    health = backend.health()
    assert not health.ok and "could not reach 127.0.0.1" in health.error


def test_health_timeout_is_unhealthy(api):
    api.fault = "timeout"
    health = backend_for(api, timeoutMs=200).health()
    assert not health.ok and "did not answer in time" in health.error


def test_initialize_succeeds_on_a_healthy_api_and_raises_on_a_failing_one(api):
    backend_for(api).initialize()
    api.fault = "500"
    with pytest.raises(BackendError, match="HTTP 500"):
        backend_for(api).initialize()


# ---- create ----


def test_create_posts_the_memory_to_the_default_endpoint(api):
    result = backend_for(api).create(
        NewMemory(api_key_id="alice", content="likes tea", key="pref:tea", session_id="s1", metadata={"a": 1})
    )
    assert result.created and result.id in api.memories and result.memory.content == "likes tea"
    (post,) = api.calls("POST", "/memories")
    assert post.json() == {
        "apiKeyId": "alice",
        "type": "factual",
        "content": "likes tea",
        "metadata": {"a": 1},
        "sessionId": "s1",
        "key": "pref:tea",
    }


def test_create_uses_a_custom_endpoint():
    with FakeMemoryApi(endpoints={"create": "/api/v2/notes"}) as api:
        result = backend_for(api, endpoints={"create": "/api/v2/notes"}).create(
            NewMemory(api_key_id="alice", content="x")
        )
        assert api.calls("POST", "/api/v2/notes") and result.id in api.memories


# ---- get ----


def test_get_returns_the_memory(api):
    memory_id = seed(api, sessionId="s1", key="k", metadata={"n": 2})
    got = backend_for(api).get(memory_id)
    assert (got.id, got.api_key_id, got.session_id, got.key, got.content, got.metadata) == (
        memory_id,
        "alice",
        "s1",
        "k",
        "likes tea",
        {"n": 2},
    )


def test_get_404_is_none(api):
    assert backend_for(api).get("missing") is None


def test_get_other_errors_raise(api):
    api.fault = "500"
    with pytest.raises(BackendError, match="HTTP 500"):
        backend_for(api).get("m-1")


def test_get_fills_a_renamed_path_parameter():
    with FakeMemoryApi(endpoints={"get": "/items/{memoryId}"}) as api:
        memory_id = seed(api)
        got = backend_for(api, endpoints={"get": "/items/{memoryId}"}, pathParams={"id": "memoryId"}).get(memory_id)
        assert got.id == memory_id and api.calls("GET", f"/items/{memory_id}")


def test_an_id_cannot_leave_its_path_segment(api):
    assert backend_for(api).get("../health") is None
    assert api.calls("GET")[-1].path == "/memories/../health"  # one segment, sent percent-encoded


# ---- update / delete ----


def test_update_puts_the_patch_and_returns_the_memory(api):
    memory_id = seed(api)
    updated = backend_for(api).update(memory_id, MemoryPatch(content="likes green tea"))
    assert updated.content == "likes green tea" and api.memories[memory_id]["content"] == "likes green tea"
    assert api.calls("PUT")[-1].json() == {"content": "likes green tea"}


def test_update_404_is_none(api):
    assert backend_for(api).update("missing", MemoryPatch(content="x")) is None


def test_delete_ok_is_true_and_404_is_false(api):
    memory_id = seed(api)
    backend = backend_for(api)
    assert backend.delete(memory_id) is True and memory_id not in api.memories
    assert backend.delete(memory_id) is False


# ---- list ----


def test_list_sends_the_filter_and_paging_as_query_parameters(api):
    seed(api, id="a", type="episodic")
    seed(api, id="b", apiKeyId="bob")
    page = backend_for(api).list(MemoryFilter(api_key_id="alice", session_id="s", type="episodic", q="tea"), 10, 5)
    call = api.calls("GET", "/memories")[-1]
    assert call.query == {
        "apiKeyId": "alice",
        "sessionId": "s",
        "type": "episodic",
        "query": "tea",
        "limit": "10",
        "offset": "5",
    }
    assert page.total == 0 and page.data == []


def test_list_uses_renamed_query_parameters():
    names = {"apiKeyId": "owner", "limit": "pageSize", "offset": "skip"}
    with FakeMemoryApi(params=names) as api:
        seed(api, id="a")
        seed(api, id="b", apiKeyId="bob")
        page = backend_for(api, queryParams=names).list(MemoryFilter(api_key_id="alice"), 10, 0)
        assert api.calls("GET", "/memories")[-1].query == {"owner": "alice", "pageSize": "10", "skip": "0"}
        assert [m.id for m in page.data] == ["a"] and page.total == 1 and page.by_type == {"factual": 1}


# ---- search ----


def test_search_sends_query_parameters_and_serialises_options(api):
    seed(api, id="a", content="likes green tea")
    seed(api, id="b", content="owns a bike")
    found = backend_for(api).search(BackendSearch("green tea", scope(), limit=5, max_tokens=300, strategy="hybrid"))
    call = api.calls("GET", "/memories/search")[-1]
    assert {k: call.query[k] for k in ("query", "apiKeyId", "limit", "strategy", "maxTokens")} == {
        "query": "green tea",
        "apiKeyId": "alice",
        "limit": "5",
        "strategy": "hybrid",
        "maxTokens": "300",
    }
    options = json.loads(call.query["options"])
    assert options["scope"] == "apiKey" and options["createdAfter"].endswith("Z")
    assert [s.memory.id for s in found] == ["a"] and found[0].score == 2.0


def test_search_uses_a_custom_endpoint():
    with FakeMemoryApi(endpoints={"search": "/v1/recall"}) as api:
        seed(api, content="likes tea")
        found = backend_for(api, endpoints={"search": "/v1/recall"}).search(BackendSearch("tea", scope()))
        assert api.calls("GET", "/v1/recall") and [s.memory.content for s in found] == ["likes tea"]


# ---- auth ----


def test_every_call_sends_the_bearer_key_and_the_custom_headers(api):
    backend = backend_for(api, headers={"X-Workspace": "team-7", "Accept": "application/json"})
    backend.health()
    backend.get("missing")
    for call in api.calls():
        assert call.headers["authorization"] == f"Bearer {KEY}" and call.headers["x-workspace"] == "team-7"


def test_without_a_key_no_authorization_header_is_sent(api):
    create_backend("open", {"type": "http", "baseUrl": api.base_url}).health()
    assert "authorization" not in api.calls()[-1].headers


# ---- URL policy ----


def test_a_metadata_address_is_refused_before_any_connection():
    backend = create_backend("meta", {"type": "http", "baseUrl": "http://169.254.169.254/latest"})
    health = backend.health()
    assert not health.ok and "link-local or cloud metadata" in health.error
    with pytest.raises(BackendError, match="link-local or cloud metadata"):
        backend.get("x")
