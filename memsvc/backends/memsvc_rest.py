"""Another memsvc, through its REST API (the Envoy gateway), as a backend: one memsvc can
front or mirror another. Memories keep their ids and owners; the remote's own settings
apply to its search (memory must be enabled there, and a global search needs its scope
setting to be global). The key is one of the remote's bearer tokens."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memsvc.backends.base import Connection
from memsvc.backends.http import HttpBackend, HttpBackendConfig, scored
from memsvc.kernel.backend import BackendHealth, BackendSearch, ScoredMemory

ENDPOINTS = {
    "search": "/api/memory/retrieve",
    "create": "/api/memory",
    "list": "/api/memory",
    "get": "/api/memory/{id}",
    "update": "/api/memory/{id}",
    "delete": "/api/memory/{id}",
    "health": "/api/memory/health",
}
#: ListMemories' own name for the content-or-key match.
QUERY_PARAMS = {"query": "q"}


class MemsvcBackend(HttpBackend):
    kind = "memsvc"

    def __init__(self, name: str, connection: Connection):
        super().__init__(name, HttpBackendConfig(connection, ENDPOINTS, QUERY_PARAMS))

    def health(self) -> BackendHealth:
        """The remote's own create → list → delete round trip: `working` decides."""
        health, body = self.http.probe("GET", ENDPOINTS["health"])
        if not health.ok:
            return health
        if isinstance(body, Mapping) and body.get("working") is True:
            return health
        error = body.get("error") if isinstance(body, Mapping) and isinstance(body.get("error"), str) else ""
        return BackendHealth(
            False,
            health.latency_ms,
            f"{self.http.host} reports its store is not working" + (f": {error[:200]}" if error else ""),
        )

    def search(self, request: BackendSearch) -> list[ScoredMemory]:
        """Retrieve on the remote (its ranking, its budget), scoped like the local call."""
        scope = request.scope
        body: dict[str, Any] = {"query": request.query, "maxTokens": request.max_tokens, "strategy": request.strategy}
        if scope.api_key_id:
            body["apiKeyId"] = scope.api_key_id
        if scope.session_id:
            body["sessionId"] = scope.session_id
        body["scope"] = "session" if scope.session_only else "apiKey" if scope.api_key_id else "global"
        answer = self.http.json(self.http.call("POST", ENDPOINTS["search"], json_body=body))
        items = answer.get("memories") if isinstance(answer, Mapping) else None
        return scored(items if isinstance(items, list) else [], scope.api_key_id or "")
