"""A Notion database as a backend, through Notion's public API (`Notion-Version`
2022-06-28, the last version in which a database is queried directly).

Each memory is one page of the database. The database needs these properties (the names
are fixed; the health check lists any that are missing or of another type):

    Name (title)   Content (text)   Type (select)   Key (text)
    Owner (text)   Session (text)   Metadata (text) Expires (date)
    Keep (checkbox: kept with no age limit, so retentionDays never hides it)
    Occurred (date: when the recorded thing happened, empty when not known)

Routes used: `POST /v1/pages` (create), `GET /v1/pages/{id}` (read), `PATCH /v1/pages/{id}`
(update; `archived: true` deletes, which is Notion's trash), `POST
/v1/databases/{id}/query` (list, search, the upsert lookup) and `GET /v1/databases/{id}`
(health). The memory's id is the page id; created and updated times are the page's.
A page of another database is never read, changed or deleted through this backend, even
when the integration can see it."""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from memsvc.backends.base import (
    Connection,
    RemoteBackend,
    fresh,
    matches,
    memory_from_json,
    page_of,
    patched,
    path_segment,
    to_iso,
    upserted,
)
from memsvc.core.retrieval.ranking import relevance
from memsvc.kernel.backend import BackendError, BackendHealth, BackendSearch, ScoredMemory
from memsvc.kernel.models import Memory, MemoryFilter, MemoryPage, MemoryPatch, NewMemory, UpsertResult, utcnow
from memsvc.kernel.text import normalize, scoring_tokens

DEFAULT_BASE_URL = "https://api.notion.com"
NOTION_VERSION = "2022-06-28"
#: Notion's limits: 2000 characters per text object, 100 results per query page.
TEXT_CHUNK = 2000
PAGE_SIZE = 100
MAX_SEARCH_TERMS = 4
PROPERTIES = {
    "Name": "title",
    "Content": "rich_text",
    "Type": "select",
    "Key": "rich_text",
    "Owner": "rich_text",
    "Session": "rich_text",
    "Metadata": "rich_text",
    "Expires": "date",
    "Keep": "checkbox",
    "Occurred": "date",
}
DATABASE_ID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_PAGE_ID = DATABASE_ID


def _compact(notion_id: str) -> str:
    return notion_id.replace("-", "").lower()


def rich_text(value: str | None) -> list[dict[str, Any]]:
    text = value or ""
    return [{"type": "text", "text": {"content": text[i : i + TEXT_CHUNK]}} for i in range(0, len(text), TEXT_CHUNK)]


def plain(prop: Any) -> str:
    """The text of a title or rich_text property value."""
    if not isinstance(prop, Mapping):
        return ""
    parts = prop.get(prop.get("type") or "rich_text") or prop.get("title") or prop.get("rich_text") or []
    out = []
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, Mapping):
            text = part.get("plain_text")
            if not isinstance(text, str):
                inner = part.get("text")
                text = inner.get("content") if isinstance(inner, Mapping) else ""
            out.append(text if isinstance(text, str) else "")
    return "".join(out)


def properties(memory: Memory) -> dict[str, Any]:
    title = memory.key or memory.content[:80]
    return {
        "Name": {"title": rich_text(title)},
        "Content": {"rich_text": rich_text(memory.content)},
        "Type": {"select": {"name": memory.type}},
        "Key": {"rich_text": rich_text(memory.key)},
        "Owner": {"rich_text": rich_text(memory.api_key_id)},
        "Session": {"rich_text": rich_text(memory.session_id)},
        "Metadata": {"rich_text": rich_text(json.dumps(memory.metadata, ensure_ascii=False, separators=(",", ":")))},
        "Expires": _date(memory.expires_at),
        "Keep": {"checkbox": memory.keep},
        "Occurred": _date(memory.occurred_at),
    }


def _date(value: datetime | None) -> dict[str, Any]:
    """A date property's value: an instant, or none (Notion clears the property)."""
    return {"date": {"start": to_iso(value)} if value else None}


def _start(props: Mapping[str, Any], name: str) -> Any:
    """The start of a date property, None when it is empty or missing."""
    date = props.get(name, {}).get("date") if isinstance(props.get(name), Mapping) else None
    return date.get("start") if isinstance(date, Mapping) else None


def memory_from_page(page: Any) -> Memory:
    if not isinstance(page, Mapping) or not isinstance(page.get("properties"), Mapping):
        raise BackendError("Notion answered with something that is not a page")
    props = page["properties"]
    try:
        metadata = json.loads(plain(props.get("Metadata")) or "{}")
    except ValueError:
        metadata = {}
    select = props.get("Type", {}).get("select") if isinstance(props.get("Type"), Mapping) else None
    return memory_from_json(
        {
            "id": page.get("id"),
            "content": plain(props.get("Content")),
            "apiKeyId": plain(props.get("Owner")),
            "sessionId": plain(props.get("Session")),
            "key": plain(props.get("Key")),
            "type": select.get("name") if isinstance(select, Mapping) else None,
            "metadata": metadata if isinstance(metadata, dict) else {},
            "createdAt": page.get("created_time"),
            "updatedAt": page.get("last_edited_time"),
            "expiresAt": _start(props, "Expires"),
            "occurredAt": _start(props, "Occurred"),
            "keep": props.get("Keep", {}).get("checkbox") if isinstance(props.get("Keep"), Mapping) else None,
        }
    )


def _text_filter(prop: str, op: str, value: str) -> dict[str, Any]:
    return {"property": prop, "rich_text": {op: value}}


def retention_filter(created_after: datetime) -> dict[str, Any]:
    """Pages inside the retention window, or kept with no age limit: the window applied by
    Notion's query, so old pages neither travel nor take a ranked slot, and a kept one is
    still found however old it is."""
    return {
        "or": [
            {"timestamp": "created_time", "created_time": {"on_or_after": to_iso(created_after)}},
            {"property": "Keep", "checkbox": {"equals": True}},
        ]
    }


def query_filter(flt: MemoryFilter) -> dict[str, Any] | None:
    """What Notion can filter on; the rest (a set of owners) is applied on return."""
    clauses: list[dict[str, Any]] = []
    if flt.api_key_id:
        clauses.append(_text_filter("Owner", "equals", flt.api_key_id))
    if flt.session_id:
        clauses.append(_text_filter("Session", "equals", flt.session_id))
    if flt.type:
        clauses.append({"property": "Type", "select": {"equals": flt.type}})
    if flt.q:
        clauses.append({"or": [_text_filter("Content", "contains", flt.q), _text_filter("Key", "contains", flt.q)]})
    if flt.created_before:
        clauses.append({"timestamp": "created_time", "created_time": {"before": to_iso(flt.created_before)}})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"and": clauses}


class NotionBackend(RemoteBackend):
    kind = "notion"

    def __init__(self, name: str, connection: Connection, database_id: str, notion_version: str = NOTION_VERSION):
        headers = {"Notion-Version": notion_version, **connection.headers}
        super().__init__(
            name,
            Connection(
                connection.base_url, connection.api_key, headers, connection.timeout_s, connection.ca_certificate
            ),
        )
        self.database_id = database_id

    def health(self) -> BackendHealth:
        health, body = self.http.probe("GET", f"/v1/databases/{path_segment(self.database_id)}")
        if not health.ok:
            return health
        schema = body.get("properties") if isinstance(body, Mapping) else None
        if not isinstance(schema, Mapping):
            return BackendHealth(False, health.latency_ms, "Notion answered without the database's properties")
        wrong = [
            f"{name} ({kind})"
            for name, kind in PROPERTIES.items()
            if not isinstance(schema.get(name), Mapping) or schema[name].get("type") != kind
        ]
        if wrong:
            return BackendHealth(False, health.latency_ms, "the database lacks the properties " + ", ".join(wrong))
        return health

    def _query(self, body: dict[str, Any]) -> Iterator[Mapping[str, Any]]:
        """Every page the query matches, newest first, following Notion's cursors."""
        body = {**body, "page_size": PAGE_SIZE, "sorts": [{"timestamp": "created_time", "direction": "descending"}]}
        while True:
            answer = self.http.json(
                self.http.call("POST", f"/v1/databases/{path_segment(self.database_id)}/query", json_body=body)
            )
            results = answer.get("results") if isinstance(answer, Mapping) else None
            if not isinstance(results, list):
                raise BackendError("Notion answered a query without results")
            yield from (r for r in results if isinstance(r, Mapping))
            cursor = answer.get("next_cursor")
            if not answer.get("has_more") or not isinstance(cursor, str):
                return
            body["start_cursor"] = cursor

    def _page(self, memory_id: str) -> Memory | None:
        if not _PAGE_ID.match(memory_id):
            return None  # not a Notion page id: not a memory of this backend
        response = self.http.call("GET", f"/v1/pages/{path_segment(memory_id)}")
        if response.status_code == 404:
            return None
        page = self.http.json(response)
        parent = page.get("parent") if isinstance(page, Mapping) else None
        if (
            page.get("archived")
            or page.get("in_trash")
            or not isinstance(parent, Mapping)
            or _compact(str(parent.get("database_id", ""))) != _compact(self.database_id)
        ):
            return None
        return memory_from_page(page)

    def _patch(self, memory_id: str, body: dict[str, Any]) -> Any:
        return self.http.json(self.http.call("PATCH", f"/v1/pages/{path_segment(memory_id)}", json_body=body))

    def create(self, memory: NewMemory) -> UpsertResult:
        now = utcnow()
        if memory.key:
            flt = MemoryFilter(api_key_id=memory.api_key_id)
            body = {"filter": {"and": [query_filter(flt), _text_filter("Key", "equals", memory.key)]}}
            existing = next((memory_from_page(p) for p in self._query(body)), None)
            if existing is not None:
                stored = upserted(existing, memory, now)
                return UpsertResult(
                    existing.id,
                    False,
                    memory=memory_from_page(self._patch(existing.id, {"properties": properties(stored)})),
                )
        draft = fresh(memory, "", now)
        page = self.http.json(
            self.http.call(
                "POST",
                "/v1/pages",
                json_body={"parent": {"database_id": self.database_id}, "properties": properties(draft)},
            )
        )
        stored = memory_from_page(page)
        return UpsertResult(stored.id, True, memory=stored)

    def get(self, memory_id: str) -> Memory | None:
        return self._page(memory_id)

    def update(self, memory_id: str, patch: MemoryPatch) -> Memory | None:
        existing = self._page(memory_id)
        if existing is None:
            return None
        return memory_from_page(self._patch(memory_id, {"properties": properties(patched(existing, patch, utcnow()))}))

    def delete(self, memory_id: str) -> bool:
        if self._page(memory_id) is None:
            return False
        self._patch(memory_id, {"archived": True})
        return True

    def list(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        body: dict[str, Any] = {}
        notion_filter = query_filter(flt)
        if notion_filter:
            body["filter"] = notion_filter
        found = [m for m in (memory_from_page(p) for p in self._query(body)) if matches(m, flt)]
        counts = page_of(found)
        return page_of(found[offset : offset + limit], counts.total, counts.by_type)

    def search(self, request: BackendSearch) -> builtins.list[ScoredMemory]:
        """Pages whose content or key contains one of the query's longest terms, ranked
        here by keyword relevance (Notion's query has no ranking of its own)."""
        terms = sorted(set(scoring_tokens(request.query)), key=len, reverse=True)[:MAX_SEARCH_TERMS]
        if not terms:
            return []
        clauses: list[dict[str, Any]] = [
            {"or": [_text_filter(p, "contains", t) for t in terms for p in ("Content", "Key")]}
        ]
        if request.scope.api_key_id:
            clauses.append(_text_filter("Owner", "equals", request.scope.api_key_id))
        if request.scope.created_after is not None:
            clauses.append(retention_filter(request.scope.created_after))
        found = [memory_from_page(p) for p in self._query({"filter": {"and": clauses}})]
        phrase, tokens = normalize(request.query).strip(), scoring_tokens(request.query)
        ranked = sorted(
            (ScoredMemory(m, relevance(m, phrase, tokens)) for m in found), key=lambda s: s.score, reverse=True
        )
        return ranked[: request.limit]
