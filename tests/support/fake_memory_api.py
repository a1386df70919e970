"""A loopback stand-in for a generic REST memory API (the shape memsvc's generic HTTP backend
speaks by default): `GET /health`, `POST /memories` (→ 201 and the stored memory),
`GET /memories` (apiKeyId, sessionId, type, query, limit, offset → {data, total, byType}),
`GET /memories/search` (query, apiKeyId, limit, options as JSON → {data: [memory + score]}),
`GET|PUT|DELETE /memories/{id}` (404 when absent). Endpoints, the `{id}` placeholder and
query parameter names can be changed to what a test configures the backend with."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from support.fake_api import FakeApi, Reply, Request

DEFAULTS = {
    "search": "/memories/search",
    "create": "/memories",
    "list": "/memories",
    "get": "/memories/{id}",
    "update": "/memories/{id}",
    "delete": "/memories/{id}",
    "health": "/health",
}


def _template(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{[A-Za-z_][A-Za-z0-9_]*\\\}", "(?P<id>[^/]+)", re.escape(path)) + "$")


class FakeMemoryApi(FakeApi):
    def __init__(self, endpoints: Mapping[str, str] | None = None, params: Mapping[str, str] | None = None):
        self.endpoints = {**DEFAULTS, **(endpoints or {})}
        self.params = dict(params or {})
        self.memories: dict[str, dict[str, Any]] = {}
        super().__init__()

    def param(self, r: Request, name: str) -> str | None:
        return r.query.get(self.params.get(name, name))

    def route(self, r: Request) -> Reply:
        e = self.endpoints
        if r.method == "GET" and r.path == e["health"]:
            return Reply(200, {"status": "ok"})
        if r.method == "GET" and r.path == e["search"]:
            return Reply(200, {"data": self._search(r)})
        if r.method == "POST" and r.path == e["create"]:
            return self._create(r.json() or {})
        if r.method == "GET" and r.path == e["list"]:
            return Reply(200, self._list(r))
        for op, method in (("get", "GET"), ("update", "PUT"), ("delete", "DELETE")):
            found = _template(e[op]).match(r.path)
            if found and r.method == method:
                return self._item(op, found.group("id"), r)
        return Reply(404, {"error": "no such route"})

    def _create(self, body: dict[str, Any]) -> Reply:
        now = datetime.now(UTC).isoformat()
        memory = {**body, "id": str(uuid.uuid4()), "createdAt": now, "updatedAt": now}
        self.memories[memory["id"]] = memory
        return Reply(201, memory)

    def _item(self, op: str, memory_id: str, r: Request) -> Reply:
        memory = self.memories.get(memory_id)
        if memory is None:
            return Reply(404, {"error": "not found"})
        if op == "delete":
            del self.memories[memory_id]
            return Reply(204)
        if op == "update":
            memory.update(r.json() or {})
        return Reply(200, memory)

    def _selected(self, r: Request) -> list[dict[str, Any]]:
        out = []
        for m in self.memories.values():
            if any(self.param(r, n) and m.get(n) != self.param(r, n) for n in ("apiKeyId", "sessionId", "type")):
                continue
            out.append(m)
        return sorted(out, key=lambda m: m["createdAt"], reverse=True)

    def _list(self, r: Request) -> dict[str, Any]:
        found = [
            m
            for m in self._selected(r)
            if not self.param(r, "query") or self.param(r, "query").lower() in m["content"].lower()
        ]
        offset, limit = int(self.param(r, "offset") or 0), int(self.param(r, "limit") or 50)
        by_type: dict[str, int] = {}
        for m in found:
            by_type[m.get("type", "factual")] = by_type.get(m.get("type", "factual"), 0) + 1
        return {"data": found[offset : offset + limit], "total": len(found), "byType": by_type}

    def _search(self, r: Request) -> list[dict[str, Any]]:
        words = (self.param(r, "query") or "").lower().split()
        hits = []
        for m in self._selected(r):
            score = sum(w in m["content"].lower() for w in words)
            if score:
                hits.append({**m, "score": float(score)})
        hits.sort(key=lambda m: m["score"], reverse=True)
        return hits[: int(self.param(r, "limit") or 20)]
