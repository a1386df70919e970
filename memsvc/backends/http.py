"""The generic HTTP backend: adapts any REST memory API to memsvc's backends.

Defaults follow the common memory REST shape: `POST /memories` creates, `GET /memories`
lists (query parameters apiKeyId, sessionId, type, query, limit, offset), `GET|PUT|DELETE
/memories/{id}` read, update and delete, `GET /memories/search` searches (query, apiKeyId,
sessionId, limit, strategy, maxTokens, and `options` as one JSON text), `GET /health`
answers 2xx when the store is usable. Every endpoint can be moved, every query parameter
renamed, and the `{id}` placeholder renamed (`pathParams: {"id": "memoryId"}` fills
`{memoryId}`). 404 means "not there" (get → None, update/delete → False); any other error
status raises BackendError."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from memsvc.backends.base import (
    Connection,
    RemoteBackend,
    memory_from_json,
    new_memory_json,
    newest_first,
    page_of,
    patch_json,
    path_segment,
    to_iso,
    unwrap_list,
)
from memsvc.kernel.backend import BackendError, BackendHealth, BackendSearch, ScoredMemory
from memsvc.kernel.models import Memory, MemoryFilter, MemoryPage, MemoryPatch, NewMemory, UpsertResult

DEFAULT_ENDPOINTS: dict[str, str] = {
    "search": "/memories/search",
    "create": "/memories",
    "list": "/memories",
    "get": "/memories/{id}",
    "update": "/memories/{id}",
    "delete": "/memories/{id}",
    "health": "/health",
}
LIST_KEYS = ("data", "memories", "results", "items")


@dataclass(frozen=True)
class HttpBackendConfig:
    connection: Connection
    endpoints: Mapping[str, str] = field(default_factory=dict)
    query_params: Mapping[str, str] = field(default_factory=dict)
    path_params: Mapping[str, str] = field(default_factory=dict)

    def endpoint(self, name: str) -> str:
        return self.endpoints.get(name) or DEFAULT_ENDPOINTS[name]

    def param(self, name: str) -> str:
        return self.query_params.get(name) or name

    def placeholder(self, name: str = "id") -> str:
        return "{" + (self.path_params.get(name) or name) + "}"


class HttpBackend(RemoteBackend):
    kind = "http"

    def __init__(self, name: str, config: HttpBackendConfig):
        super().__init__(name, config.connection)
        self.config = config

    def _item_path(self, endpoint: str, memory_id: str) -> str:
        return self.config.endpoint(endpoint).replace(self.config.placeholder(), path_segment(memory_id))

    def _params(self, **values: Any) -> dict[str, Any]:
        return {self.config.param(name): value for name, value in values.items()}

    def health(self) -> BackendHealth:
        return self.http.probe("GET", self.config.endpoint("health"))[0]

    def create(self, memory: NewMemory) -> UpsertResult:
        body = self.http.json(self.http.call("POST", self.config.endpoint("create"), json_body=new_memory_json(memory)))
        body = body.get("data", body) if isinstance(body, Mapping) and isinstance(body.get("data"), Mapping) else body
        if not isinstance(body, Mapping) or not isinstance(body.get("id"), str) or not body["id"]:
            raise BackendError(f"{self.http.host} answered a create without the new memory's id")
        created = body.get("created")
        stored = memory_from_json(body, memory.api_key_id) if isinstance(body.get("content"), str) else None
        return UpsertResult(body["id"], created if isinstance(created, bool) else True, stored)

    def get(self, memory_id: str) -> Memory | None:
        response = self.http.call("GET", self._item_path("get", memory_id))
        if response.status_code == 404:
            return None
        return memory_from_json(_one(self.http.json(response)))

    def update(self, memory_id: str, patch: MemoryPatch) -> Memory | None:
        response = self.http.call("PUT", self._item_path("update", memory_id), json_body=patch_json(patch))
        if response.status_code == 404:
            return None
        body = _one(self.http.json(response))
        if isinstance(body, Mapping) and isinstance(body.get("content"), str) and body.get("id"):
            return memory_from_json(body)
        return self.get(memory_id)

    def delete(self, memory_id: str) -> bool:
        response = self.http.call("DELETE", self._item_path("delete", memory_id))
        if response.status_code == 404:
            return False
        self.http.expect(response)
        return True

    def list(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        """A listing confined to a set of owners (a tenant token naming no apiKeyId) asks the
        remote for each owner by name: a REST memory API filters one apiKeyId at a time, and
        asking it for everything would hand the caller every tenant's memories."""
        if flt.api_key_id is None and flt.owners is not None:
            return self._list_owners(flt, limit, offset)
        return self._list_one(flt, limit, offset)

    def _list_owners(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        """Each owner's newest `offset + limit`, merged newest first; totals and counts summed."""
        found: list[Memory] = []
        total, by_type = 0, dict[str, int]()
        for owner in sorted(flt.owners or ()):
            kept, last = self._owner_newest(replace(flt, api_key_id=owner, owners=None), offset + limit, limit)
            found += kept
            total += last.total
            for name, count in last.by_type.items():
                by_type[name] = by_type.get(name, 0) + count
        return page_of(newest_first(found)[offset : offset + limit], total, by_type)

    def _owner_newest(self, flt: MemoryFilter, wanted: int, limit: int) -> tuple[builtins.list[Memory], MemoryPage]:
        """Up to `wanted` of one owner's newest memories, fetched a page of `limit` at a time
        (so the remote's own page-size limit holds), and the last page read. Whatever a
        remote that ignores apiKeyId answers for other owners is dropped."""
        kept: list[Memory] = []
        fetched = 0
        while True:
            page = self._list_one(flt, limit, fetched)
            fetched += len(page.data)
            kept += [m for m in page.data if m.api_key_id == flt.api_key_id]
            if len(page.data) < limit or len(kept) >= wanted:
                return kept[:wanted], page

    def _list_one(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        params = self._params(
            apiKeyId=flt.api_key_id, sessionId=flt.session_id, type=flt.type, query=flt.q, limit=limit, offset=offset
        )
        body = self.http.json(self.http.call("GET", self.config.endpoint("list"), params=params))
        memories = [memory_from_json(item) for item in unwrap_list(body, *LIST_KEYS)]
        total = body.get("total") if isinstance(body, Mapping) else None
        by_type = body.get("byType") if isinstance(body, Mapping) else None
        if by_type is None and isinstance(body, Mapping) and isinstance(body.get("stats"), Mapping):
            by_type = body["stats"].get("byType")
        return page_of(
            memories, total if isinstance(total, int) else None, by_type if isinstance(by_type, Mapping) else None
        )

    def search(self, request: BackendSearch) -> builtins.list[ScoredMemory]:
        scope = request.scope
        params = self._params(
            query=request.query,
            apiKeyId=scope.api_key_id,
            sessionId=scope.session_id,
            limit=request.limit,
            strategy=request.strategy,
            maxTokens=request.max_tokens,
            options=search_options(request),
        )
        body = self.http.json(self.http.call("GET", self.config.endpoint("search"), params=params))
        return scored(unwrap_list(body, *LIST_KEYS), scope.api_key_id or "")


def search_options(request: BackendSearch) -> dict[str, Any]:
    """The rest of the scope, for APIs that can apply it (sent as one JSON value)."""
    scope = request.scope
    options: dict[str, Any] = {"scope": "session" if scope.session_only else "apiKey" if scope.api_key_id else "global"}
    if scope.created_after is not None:
        options["createdAfter"] = to_iso(scope.created_after)
    return options


def scored(items: list[Any], owner: str) -> list[ScoredMemory]:
    out = []
    for item in items:
        score = item.get("score") if isinstance(item, Mapping) else None
        inner = item.get("memory") if isinstance(item, Mapping) and isinstance(item.get("memory"), Mapping) else item
        out.append(
            ScoredMemory(memory_from_json(inner, owner), float(score) if isinstance(score, (int, float)) else 0.0)
        )
    return out


def _one(body: Any) -> Any:
    """A single memory, bare or wrapped as {"data": ...} or {"memory": ...}."""
    if isinstance(body, Mapping):
        for name in ("data", "memory"):
            if isinstance(body.get(name), Mapping):
                return body[name]
    return body
