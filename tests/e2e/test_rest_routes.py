"""Every documented REST route, through the real Envoy gateway.

The route list is read from the generated descriptors (the `google.api.http` options Envoy
transcodes from), checked against the contract's route table, and then every route is called:
each RPC answers its real status (never 404/503 from a routing mistake).
Auth is checked on every route against a server started with a token.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Rest, ServerHandle, make_config, start_gateway, start_server
from google.api import annotations_pb2

from memsvc.v1 import engine_pb2, memory_pb2, settings_pb2

pytestmark = pytest.mark.e2e

# ---- the documented route table, hard-coded: (HTTP method, path template, RPC) -----------

CONTRACT_ROUTES: list[tuple[str, str, str]] = [
    # memsvc.v1.MemoryService
    ("GET", "/api/memory", "memsvc.v1.MemoryService.ListMemories"),
    ("POST", "/api/memory", "memsvc.v1.MemoryService.CreateMemory"),
    ("POST", "/api/memory/batch", "memsvc.v1.MemoryService.CreateMemories"),
    ("DELETE", "/api/memory", "memsvc.v1.MemoryService.ClearMemories"),
    ("GET", "/api/memory/{id}", "memsvc.v1.MemoryService.GetMemory"),
    ("PUT", "/api/memory/{id}", "memsvc.v1.MemoryService.UpdateMemory"),
    ("DELETE", "/api/memory/{id}", "memsvc.v1.MemoryService.DeleteMemory"),
    ("GET", "/api/memory/{id}/history", "memsvc.v1.MemoryService.GetMemoryHistory"),
    ("GET", "/api/memory/watch", "memsvc.v1.MemoryService.WatchMemories"),
    ("GET", "/api/memory/health", "memsvc.v1.MemoryService.CheckHealth"),
    ("GET", "/api/memory/recent_files", "memsvc.v1.MemoryService.ListRecentFiles"),
    ("GET", "/api/memory/recent_file", "memsvc.v1.MemoryService.GetRecentFile"),
    ("POST", "/api/memory/recent_file/save", "memsvc.v1.MemoryService.SaveRecentFile"),
    ("POST", "/api/memory/recent_file/append", "memsvc.v1.MemoryService.AppendRecentMessages"),
    ("POST", "/api/memory/update_catgirl_name", "memsvc.v1.MemoryService.RenameCharacter"),
    ("POST", "/api/characters/catgirl/{old_name}/rename", "memsvc.v1.MemoryService.RenameCharacter"),
    ("GET", "/api/memory/legacy/scan", "memsvc.v1.MemoryService.ScanLegacy"),
    ("POST", "/api/memory/legacy/purge", "memsvc.v1.MemoryService.PurgeLegacy"),
    # memsvc.v1.EngineService
    ("POST", "/api/memory/retrieve", "memsvc.v1.EngineService.Retrieve"),
    ("POST", "/api/memory/inject", "memsvc.v1.EngineService.Inject"),
    ("POST", "/api/memory/extract", "memsvc.v1.EngineService.Extract"),
    ("POST", "/api/memory/retrieve-preview", "memsvc.v1.EngineService.RetrievePreview"),
    ("GET", "/api/memory/embedding-providers", "memsvc.v1.EngineService.ListEmbeddingProviders"),
    ("GET", "/api/memory/engine-status", "memsvc.v1.EngineService.GetEngineStatus"),
    ("POST", "/api/memory/summarize", "memsvc.v1.EngineService.Summarize"),
    ("POST", "/api/memory/reindex", "memsvc.v1.EngineService.Reindex"),
    # memsvc.v1.SettingsService
    ("GET", "/api/settings/memory", "memsvc.v1.SettingsService.GetMemorySettings"),
    ("PUT", "/api/settings/memory", "memsvc.v1.SettingsService.UpdateMemorySettings"),
    ("GET", "/api/settings/qdrant", "memsvc.v1.SettingsService.GetQdrantSettings"),
    ("PUT", "/api/settings/qdrant", "memsvc.v1.SettingsService.UpdateQdrantSettings"),
    ("GET", "/api/settings/qdrant/health", "memsvc.v1.SettingsService.CheckQdrantHealth"),
    ("POST", "/api/settings/qdrant/search", "memsvc.v1.SettingsService.SearchQdrant"),
    ("POST", "/api/settings/qdrant/cleanup", "memsvc.v1.SettingsService.CleanupQdrant"),
    ("GET", "/api/settings/qdrant/embedding-models", "memsvc.v1.SettingsService.ListQdrantEmbeddingModels"),
    ("GET", "/api/memory/review_config", "memsvc.v1.SettingsService.GetReviewConfig"),
    ("POST", "/api/memory/review_config", "memsvc.v1.SettingsService.SetReviewConfig"),
    ("GET", "/api/memory/powerful_memory_config", "memsvc.v1.SettingsService.GetPowerfulMemoryConfig"),
    ("POST", "/api/memory/powerful_memory_config", "memsvc.v1.SettingsService.SetPowerfulMemoryConfig"),
]

# Values put into path templates when a route is called.
SAMPLE_ID = "no-such-memory-0f3c"
SAMPLE_PATH_VALUES = {"id": SAMPLE_ID, "old_name": "Mia"}

# ---- routes from the descriptors ------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    method: str
    template: str
    rpc: str  # full name, e.g. memsvc.v1.MemoryService.GetMemory
    has_body: bool

    @property
    def rpc_name(self) -> str:
        return self.rpc.rsplit(".", 1)[1]

    @property
    def path(self) -> str:
        return fill_template(self.template)

    def __str__(self) -> str:
        return f"{self.method} {self.template} -> {self.rpc_name}"


_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)(=[^}]*)?\}")


def fill_template(template: str) -> str:
    def sample(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in SAMPLE_PATH_VALUES:
            raise KeyError(f"no sample value for path variable {{{name}}} in {template}")
        return SAMPLE_PATH_VALUES[name]

    return _VARIABLE.sub(sample, template)


def _rule_route(rule: Any, rpc: str) -> Route:
    pattern = rule.WhichOneof("pattern")
    assert pattern is not None, f"{rpc}: google.api.http rule without a pattern"
    if pattern == "custom":
        method, template = rule.custom.kind.upper(), rule.custom.path
    else:
        method, template = pattern.upper(), getattr(rule, pattern)
    return Route(method, template, rpc, bool(rule.body))


def descriptor_routes() -> list[Route]:
    """(method, path template, rpc) for every binding of every RPC of the three services,
    additional_bindings included, read from the generated descriptors."""
    routes: list[Route] = []
    for module in (memory_pb2, engine_pb2, settings_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                options = method.GetOptions()
                if not options.HasExtension(annotations_pb2.http):
                    continue
                rule = options.Extensions[annotations_pb2.http]
                routes.append(_rule_route(rule, method.full_name))
                for extra in rule.additional_bindings:
                    routes.append(_rule_route(extra, method.full_name))
    return routes


ROUTES = descriptor_routes()


def _route_id(route: Route) -> str:
    return f"{route.method} {route.template}"


# ---- what each route must answer on a fresh, empty store ------------------------------------


def _expect_list(status: int, body: Any) -> None:
    assert status == 200, body
    assert {"data", "total", "page", "limit", "totalPages", "stats"} <= set(body), body


def _bad_request_fields(body: Any) -> set[str]:
    assert isinstance(body, dict), body
    assert body.get("code") == 3, body
    fields: set[str] = set()
    for detail in body.get("details", []):
        if detail.get("@type") == "type.googleapis.com/google.rpc.BadRequest":
            fields |= {v["field"] for v in detail.get("fieldViolations", [])}
    return fields


def _expect_create_empty(status: int, body: Any) -> None:
    assert status == 400, body
    assert {"apiKeyId", "content"} <= _bad_request_fields(body), body


def _expect_clear_without_owner(status: int, body: Any) -> None:
    assert status == 400, body
    assert "apiKeyId" in _bad_request_fields(body), body


def _expect_memory_not_found(status: int, body: Any) -> None:
    assert status == 404, body
    assert isinstance(body, dict) and body.get("code") == 5, body
    assert SAMPLE_ID in body["message"], body


def _expect_caught_up_feed(status: int, body: Any) -> None:
    assert status == 200, body
    assert isinstance(body, list) and [e["kind"] for e in body] == ["bookmark", "bookmark"], body


def _expect_update_empty(status: int, body: Any) -> None:
    assert status == 400, body
    assert isinstance(body, dict) and body.get("code") == 3, body


def _expect_health(status: int, body: Any) -> None:
    assert status == 200, body
    assert body.get("working") is True, body
    assert isinstance(body.get("latencyMs"), int), body


def _expect_bad_request_naming(*fields: str) -> Callable[[int, Any], None]:
    def expect(status: int, body: Any) -> None:
        assert status == 400, body
        assert set(fields) <= _bad_request_fields(body), body

    return expect


def _expect_skipped_without_owner(status: int, body: Any) -> None:
    """Inject/Extract never fail a chat request: an empty one is answered, doing nothing."""
    assert status == 200, body
    assert body.get("skippedReason") == "no apiKeyId", body


def _expect_default_settings(status: int, body: Any) -> None:
    assert status == 200, body
    assert body.get("enabled") is False and body.get("maxTokens") == 2000, body


def _expect_no_recent_files(status: int, body: Any) -> None:
    assert status == 200, body
    assert body == {"files": []}, body


def _expect_empty_legacy_scan(status: int, body: Any) -> None:
    assert status == 200, body
    assert body["success"] is True and body["legacy_roots"] == [] and body["total_entries"] == 0, body
    assert body["total_size_bytes"] == 0 and body["runtime_memory_dir"].endswith("memory"), body


def _expect_rename_names_missing(status: int, body: Any) -> None:
    """The alias gets {} (old_name missing first); the canonical route has old_name in its
    path, so new_name is what is missing."""
    assert status == 400, body
    assert _bad_request_fields(body) in ({"old_name"}, {"new_name"}), body


def _expect_toggle_on(status: int, body: Any) -> None:
    assert status == 200, body
    assert body == {"enabled": True}, body


def _expect_precondition(reason: str) -> Callable[[int, Any], None]:
    """FAILED_PRECONDITION (no embedding source, Qdrant disabled) is a 400 with its reason."""

    def expect(status: int, body: Any) -> None:
        assert status == 400 and body.get("code") == 9, body
        assert reason in {d.get("reason") for d in body.get("details", [])}, body

    return expect


def _expect_local_providers(status: int, body: Any) -> None:
    assert status == 200, body
    assert {"static", "transformers"} <= {p["provider"] for p in body["providers"]}, body


def _expect_engine_status(status: int, body: Any) -> None:
    assert status == 200, body
    assert body["keyword"] == {"available": True, "backend": "FTS5", "reason": ""}, body
    assert body["embedding"]["source"] == "none" and body["qdrant"]["enabled"] is False, body
    assert body["retrieval"] == {"fusion": "gated-convex", "rrfK": 60, "listTopK": 20}, body


def _expect_qdrant_off(status: int, body: Any) -> None:
    assert status == 200, body
    assert body.get("enabled", body.get("ok")) is False, body


def _expect_models(status: int, body: Any) -> None:
    assert status == 200 and any(m["dimensions"] == 384 for m in body["models"]), body


IMPLEMENTED: dict[str, Callable[[int, Any], None]] = {
    "memsvc.v1.EngineService.GetEngineStatus": _expect_engine_status,
    "memsvc.v1.EngineService.ListEmbeddingProviders": _expect_local_providers,
    "memsvc.v1.EngineService.Reindex": _expect_precondition("NO_EMBEDDING_SOURCE"),
    "memsvc.v1.SettingsService.GetQdrantSettings": _expect_qdrant_off,
    "memsvc.v1.SettingsService.UpdateQdrantSettings": _expect_bad_request_naming("settings"),
    "memsvc.v1.SettingsService.CheckQdrantHealth": _expect_qdrant_off,
    "memsvc.v1.SettingsService.SearchQdrant": _expect_bad_request_naming("query"),
    "memsvc.v1.SettingsService.CleanupQdrant": _expect_precondition("QDRANT_DISABLED"),
    "memsvc.v1.SettingsService.ListQdrantEmbeddingModels": _expect_models,
    "memsvc.v1.MemoryService.ListRecentFiles": _expect_no_recent_files,
    "memsvc.v1.MemoryService.GetRecentFile": _expect_bad_request_naming("filename"),
    "memsvc.v1.MemoryService.SaveRecentFile": _expect_bad_request_naming("filename"),
    "memsvc.v1.MemoryService.AppendRecentMessages": _expect_bad_request_naming("messages"),
    # The alias gets {} (old_name missing); the canonical route has old_name in its path.
    "memsvc.v1.MemoryService.RenameCharacter": _expect_rename_names_missing,
    "memsvc.v1.MemoryService.ScanLegacy": _expect_empty_legacy_scan,
    "memsvc.v1.MemoryService.PurgeLegacy": _expect_bad_request_naming("paths"),
    "memsvc.v1.SettingsService.GetReviewConfig": _expect_toggle_on,
    "memsvc.v1.SettingsService.SetReviewConfig": _expect_bad_request_naming("enabled"),
    "memsvc.v1.SettingsService.GetPowerfulMemoryConfig": _expect_toggle_on,
    "memsvc.v1.SettingsService.SetPowerfulMemoryConfig": _expect_bad_request_naming("enabled"),
    "memsvc.v1.EngineService.Retrieve": _expect_bad_request_naming("apiKeyId"),
    "memsvc.v1.EngineService.RetrievePreview": _expect_bad_request_naming("query"),
    "memsvc.v1.EngineService.Summarize": _expect_bad_request_naming("apiKeyId"),
    "memsvc.v1.EngineService.Inject": _expect_skipped_without_owner,
    "memsvc.v1.EngineService.Extract": _expect_skipped_without_owner,
    "memsvc.v1.SettingsService.GetMemorySettings": _expect_default_settings,
    "memsvc.v1.SettingsService.UpdateMemorySettings": _expect_bad_request_naming("settings"),
    "memsvc.v1.MemoryService.ListMemories": _expect_list,
    "memsvc.v1.MemoryService.CreateMemory": _expect_create_empty,
    "memsvc.v1.MemoryService.CreateMemories": _expect_bad_request_naming("memories"),
    "memsvc.v1.MemoryService.ClearMemories": _expect_clear_without_owner,
    "memsvc.v1.MemoryService.GetMemory": _expect_memory_not_found,
    "memsvc.v1.MemoryService.GetMemoryHistory": _expect_memory_not_found,
    "memsvc.v1.MemoryService.WatchMemories": _expect_caught_up_feed,
    "memsvc.v1.MemoryService.UpdateMemory": _expect_update_empty,
    "memsvc.v1.MemoryService.DeleteMemory": _expect_memory_not_found,
    "memsvc.v1.MemoryService.CheckHealth": _expect_health,
}


def check_route_answer(route: Route, status: int, body: Any) -> None:
    IMPLEMENTED[route.rpc](status, body)


#: Routes that stream until the client leaves: asked to end once caught up, so the answer ends.
UNTIL_CAUGHT_UP = {"memsvc.v1.MemoryService.WatchMemories": "?stopWhenCaughtUp=true"}


def call_route(rest: Rest, route: Route, **kwargs: Any) -> tuple[int, Any]:
    path = route.path + UNTIL_CAUGHT_UP.get(route.rpc, "")
    return rest.call(route.method, path, body={} if route.has_body else None, **kwargs)


# ---- fixtures -------------------------------------------------------------------------------


@dataclass
class Stack:
    server: ServerHandle
    rest: Rest
    base: str


def _start_stack(data_dir: Path, **config: Any) -> Iterator[Stack]:
    handle = start_server(make_config(data_dir, **config))
    try:
        gateway = start_gateway(handle)
    except BaseException:
        handle.stop()
        raise
    base = f"http://127.0.0.1:{gateway.settings.listen_port}"
    try:
        yield Stack(handle, Rest(base), base)
    finally:
        gateway.stop()
        handle.stop()


@pytest.fixture(scope="module")
def open_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One server (no auth, fresh database) and one Envoy for the route tests."""
    yield from _start_stack(tmp_path_factory.mktemp("routes-open"))


@pytest.fixture(scope="module")
def authed_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server that requires `Authorization: Bearer s3cret`, with its own Envoy."""
    yield from _start_stack(tmp_path_factory.mktemp("routes-auth"), api_tokens=("s3cret",))


# ---- the route table ------------------------------------------------------------------------


def test_descriptor_routes_equal_contract_route_table() -> None:
    found_pairs = Counter((r.method, r.template) for r in ROUTES)
    expected_pairs = Counter((m, p) for m, p, _ in CONTRACT_ROUTES)
    duplicates = [pair for pair, n in found_pairs.items() if n > 1]
    assert not duplicates, f"routes bound twice in the protos: {duplicates}"
    missing = sorted(expected_pairs - found_pairs)
    extra = sorted(found_pairs - expected_pairs)
    assert not missing and not extra, f"missing from protos: {missing}; not documented: {extra}"
    # And each route is bound to the RPC the contract names.
    assert sorted((r.method, r.template, r.rpc) for r in ROUTES) == sorted(CONTRACT_ROUTES)


def test_every_rpc_of_the_three_services_has_a_route() -> None:
    rpcs = {
        m.full_name
        for module in (memory_pb2, engine_pb2, settings_pb2)
        for s in module.DESCRIPTOR.services_by_name.values()
        for m in s.methods
    }
    routed = {r.rpc for r in ROUTES}
    assert rpcs == routed, f"RPCs without a REST route: {sorted(rpcs - routed)}"
    # The compatibility alias and the canonical rename route both exist.
    rename = [r for r in ROUTES if r.rpc_name == "RenameCharacter"]
    assert {r.template for r in rename} == {
        "/api/memory/update_catgirl_name",
        "/api/characters/catgirl/{old_name}/rename",
    }


def test_every_rpc_has_an_expected_answer() -> None:
    """Every RPC of the contract is built: each has its own expectation in the table."""
    assert set(IMPLEMENTED) == {r.rpc for r in ROUTES}


# ---- every route through Envoy --------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES, ids=_route_id)
def test_route_resolves_to_its_rpc(open_stack: Stack, route: Route) -> None:
    status, body = call_route(open_stack.rest, route)
    check_route_answer(route, status, body)


@pytest.mark.parametrize(
    "path, rpc",
    [
        ("/api/memory/recent_files", "ListRecentFiles"),
        ("/api/memory/recent_file", "GetRecentFile"),
        ("/api/memory/engine-status", "GetEngineStatus"),
        ("/api/memory/embedding-providers", "ListEmbeddingProviders"),
        ("/api/memory/legacy/scan", "ScanLegacy"),
        ("/api/memory/review_config", "GetReviewConfig"),
        ("/api/memory/powerful_memory_config", "GetPowerfulMemoryConfig"),
    ],
)
def test_fixed_paths_are_not_shadowed_by_get_memory(open_stack: Stack, path: str, rpc: str) -> None:
    status, body = open_stack.rest.call("GET", path)
    assert status != 404, f"GET {path} reached GetMemory: {body!r}"
    route = next(r for r in ROUTES if r.method == "GET" and r.template == path)
    assert route.rpc_name == rpc
    IMPLEMENTED[route.rpc](status, body)  # the RPC's own answer, not GetMemory's


def test_watch_path_is_not_shadowed_by_get_memory(open_stack: Stack) -> None:
    """GET /api/memory/watch is the change feed (a literal segment wins over {id})."""
    status, body = open_stack.rest.call("GET", "/api/memory/watch?stopWhenCaughtUp=true")
    _expect_caught_up_feed(status, body)


def test_health_path_is_not_shadowed_by_get_memory(open_stack: Stack) -> None:
    status, body = open_stack.rest.call("GET", "/api/memory/health")
    assert status == 200, body
    assert body["working"] is True and isinstance(body["latencyMs"], int), body
    assert "code" not in body


def test_shadow_list_covers_every_single_segment_get_route() -> None:
    """Any GET /api/memory/<literal> route must be in the shadowing test above."""
    tested = {
        "/api/memory/health",
        "/api/memory/recent_files",
        "/api/memory/recent_file",
        "/api/memory/engine-status",
        "/api/memory/embedding-providers",
        "/api/memory/review_config",
        "/api/memory/powerful_memory_config",
        "/api/memory/watch",
    }
    single = {r.template for r in ROUTES if r.method == "GET" and re.fullmatch(r"/api/memory/[^/{}]+", r.template)}
    assert single == tested


@pytest.mark.parametrize(
    "path",
    ["/api/nothing", "/api/memoryx", "/api/memory/a/b/c", "/api/settings/nope", "/api/characters/catgirl/Mia", "/"],
)
def test_unknown_path_is_404(open_stack: Stack, path: str) -> None:
    status, body = open_stack.rest.call("GET", path)
    assert status == 404, body
    # Rejected by Envoy itself (JSON like every error, via local_reply_config), not by
    # GetMemory's "memory not found", which would carry an ErrorInfo detail.
    assert body == {"code": 5, "message": f"Could not resolve {path} to a method."}, body


@pytest.mark.parametrize(
    "path", ["/api/memory?bogus=1", "/api/memory/health?bogus=1", "/api/memory?apiKeyId=a&api_key=1"]
)
def test_unknown_query_parameter_is_400(open_stack: Stack, path: str) -> None:
    status, body = open_stack.rest.call("GET", path)
    assert status == 400, body
    assert body["code"] == 3 and "Could not find field" in body["message"], body


def test_known_query_parameters_are_accepted(open_stack: Stack) -> None:
    status, body = open_stack.rest.call(
        "GET", "/api/memory?apiKeyId=routes-q&sessionId=s&type=factual&q=x&limit=5&page=1&offset=0"
    )
    assert status == 200, body
    assert body["limit"] == 5 and body["total"] == 0


def _paths_without_post() -> list[str]:
    by_template: dict[str, set[str]] = {}
    for r in ROUTES:
        by_template.setdefault(r.template, set()).add(r.method)
    return sorted(fill_template(t) for t, methods in by_template.items() if "POST" not in methods)


@pytest.mark.parametrize("path", _paths_without_post())
def test_post_to_a_path_without_post_is_404(open_stack: Stack, path: str) -> None:
    """Envoy's transcoder (reject_unknown_method) answers 404, not 405, for a method the
    path does not have."""
    status, body = open_stack.rest.call("POST", path, body={})
    assert status == 404, body
    # Envoy's own reply (no RPC ran), not a service NOT_FOUND with an ErrorInfo detail.
    assert body == {"code": 5, "message": f"Could not resolve {path.split('?')[0]} to a method."}, body


def test_unsupported_method_is_404(open_stack: Stack) -> None:
    status, body = open_stack.rest.call("PATCH", "/api/memory", body={})
    assert status == 404, body


# ---- auth through Envoy ---------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES, ids=_route_id)
def test_auth_required_on_every_route(authed_stack: Stack, route: Route) -> None:
    anonymous = Rest(authed_stack.base)
    status, body = call_route(anonymous, route)
    assert status == 401, f"{route}: {status} {body!r}"
    assert isinstance(body, dict) and body.get("code") == 16, body
    assert isinstance(body.get("message"), str) and body["message"], body

    wrong = Rest(authed_stack.base, token="not-the-token")
    status, body = call_route(wrong, route)
    assert status == 401, f"{route}: {status} {body!r}"
    assert body.get("code") == 16, body

    right = Rest(authed_stack.base, token="s3cret")
    status, body = call_route(right, route)
    assert status != 401, f"{route}: refused with the right token: {body!r}"
    # With the token, the route answers exactly what it answers on an open server.
    check_route_answer(route, status, body)


@pytest.mark.parametrize(
    "header", ["s3cret", "Basic s3cret", "Bearer", "Bearer s3cret-and-more", "Bearer S3CRET", "Bearers3cret"]
)
def test_malformed_or_wrong_authorization_is_401(authed_stack: Stack, header: str) -> None:
    status, body = Rest(authed_stack.base).call("GET", "/api/memory", headers={"Authorization": header})
    assert status == 401, body
    assert body["code"] == 16, body


def test_bearer_scheme_is_case_insensitive(authed_stack: Stack) -> None:
    status, body = Rest(authed_stack.base).call("GET", "/api/memory/health", headers={"Authorization": "bearer s3cret"})
    assert status == 200, body
    assert body["working"] is True
