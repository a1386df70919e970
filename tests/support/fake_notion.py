"""A loopback stand-in for Notion's public API (Notion-Version 2022-06-28), with the shapes of
its reference: `GET /v1/databases/{id}` (the database and its property schema), `POST
/v1/databases/{id}/query` (filter with and/or, rich_text equals/contains, select equals,
checkbox equals, created_time before/on_or_after; sorts by timestamp; page_size up to 100 with start_cursor/next_cursor/
has_more; archived pages left out), `POST /v1/pages`, `GET /v1/pages/{id}`, `PATCH
/v1/pages/{id}` (properties, archived). Requests need `Authorization: Bearer` and a
`Notion-Version` header; errors are {"object": "error", "status", "code", "message"}; a
text object over 2000 characters is a validation_error, as Notion answers."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

from support.fake_api import FakeApi, Reply, Request

SCHEMA = {
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
UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")


def error(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"object": "error", "status": status, "code": code, "message": message})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + "000Z"


def _empty(kind: str) -> Any:
    """A property's value on a page that never set it: no text, no date, an unticked box."""
    return [] if kind in ("title", "rich_text") else False if kind == "checkbox" else None


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _plain(value: Any) -> str:
    return "".join(t.get("plain_text", "") for t in value or [])


class FakeNotion(FakeApi):
    def __init__(self, token: str = "secret_notion_test_token", schema: dict[str, str] | None = None):
        self.token = token
        self.database_id = str(uuid.uuid4())
        self.schema = dict(SCHEMA if schema is None else schema)
        self.pages: dict[str, dict[str, Any]] = {}
        self._clock = 0
        super().__init__()

    def live_pages(self) -> list[dict[str, Any]]:
        with self._lock:
            return [p for p in self.pages.values() if not p["archived"]]

    def backdate(self, page_id: str, when: datetime) -> None:
        """Set a page's created_time, as the SQLite tests age a row with direct SQL (Notion
        never lets a client set it; a test needs an old page without waiting)."""
        with self._lock:
            self.pages[page_id]["created_time"] = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def text_of(self, page: dict[str, Any], prop: str) -> str:
        value = page["properties"][prop]
        return _plain(value.get(value["type"]))

    def route(self, r: Request) -> Reply:
        if r.headers.get("authorization") != f"Bearer {self.token}":
            return error(401, "unauthorized", "API token is invalid.")
        if not r.headers.get("notion-version"):
            return error(400, "missing_version", "Notion-Version header failed validation")
        db = re.match(r"^/v1/databases/([^/]+)(/query)?$", r.path)
        if db:
            if db.group(1).replace("-", "") != self.database_id.replace("-", ""):
                return error(404, "object_not_found", "Could not find database")
            return self._query(r.json() or {}) if db.group(2) and r.method == "POST" else self._database()
        if r.path == "/v1/pages" and r.method == "POST":
            return self._create(r.json() or {})
        page = re.match(r"^/v1/pages/([^/]+)$", r.path)
        if page:
            return self._page(r, page.group(1))
        return error(400, "invalid_request_url", "Invalid request URL.")

    def _database(self) -> Reply:
        props = {name: {"id": name[:4], "name": name, "type": kind, kind: {}} for name, kind in self.schema.items()}
        return Reply(
            200,
            {"object": "database", "id": self.database_id, "properties": props, "title": [{"plain_text": "Memories"}]},
        )

    def _properties(self, given: dict[str, Any], current: dict[str, Any] | None) -> dict[str, Any] | Reply:
        out = dict(
            current or {name: {"id": name[:4], "type": kind, kind: _empty(kind)} for name, kind in self.schema.items()}
        )
        for name, value in given.items():
            kind = self.schema.get(name)
            if kind is None or kind not in value:
                return error(400, "validation_error", f"{name} is not a property that exists.")
            if kind in ("title", "rich_text"):
                if any(len(t["text"]["content"]) > 2000 for t in value[kind]):
                    return error(
                        400,
                        "validation_error",
                        "body.properties.Content.rich_text[0].text.content.length should be ≤ `2000`",
                    )
                value = {kind: [{**t, "plain_text": t["text"]["content"]} for t in value[kind]]}
            if kind == "checkbox" and not isinstance(value[kind], bool):
                return error(400, "validation_error", f"body.properties.{name}.checkbox should be a boolean")
            out[name] = {"id": name[:4], "type": kind, kind: value[kind]}
        return out

    def _create(self, body: dict[str, Any]) -> Reply:
        parent = (body.get("parent") or {}).get("database_id", "")
        if parent.replace("-", "") != self.database_id.replace("-", ""):
            return error(404, "object_not_found", "Could not find database")
        props = self._properties(body.get("properties") or {}, None)
        if isinstance(props, Reply):
            return props
        self._clock += 1
        page_id = str(uuid.uuid4())
        now = _now()
        self.pages[page_id] = {
            "object": "page",
            "id": page_id,
            "created_time": now,
            "last_edited_time": now,
            "archived": False,
            "in_trash": False,
            "_order": self._clock,
            "parent": {"type": "database_id", "database_id": self.database_id},
            "properties": props,
        }
        return Reply(200, self._public(self.pages[page_id]))

    @staticmethod
    def _public(page: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in page.items() if not k.startswith("_")}

    def _page(self, r: Request, page_id: str) -> Reply:
        if not UUID.match(page_id):
            return error(400, "validation_error", "path failed validation: path.page_id should be a valid uuid")
        key = next((k for k in self.pages if k.replace("-", "") == page_id.replace("-", "")), None)
        if key is None:
            return error(404, "object_not_found", f"Could not find page with ID: {page_id}.")
        page = self.pages[key]
        if r.method == "PATCH":
            body = r.json() or {}
            props = self._properties(body.get("properties") or {}, page["properties"])
            if isinstance(props, Reply):
                return props
            page["properties"] = props
            if "archived" in body:
                page["archived"] = page["in_trash"] = bool(body["archived"])
            page["last_edited_time"] = _now()
        return Reply(200, self._public(page))

    def _matches(self, page: dict[str, Any], flt: dict[str, Any]) -> bool:
        if "and" in flt:
            return all(self._matches(page, f) for f in flt["and"])
        if "or" in flt:
            return any(self._matches(page, f) for f in flt["or"])
        if flt.get("timestamp") == "created_time":
            condition = flt["created_time"]
            if "on_or_after" in condition:
                return _instant(page["created_time"]) >= _instant(condition["on_or_after"])
            return _instant(page["created_time"]) < _instant(condition["before"])
        prop = page["properties"].get(flt.get("property"))
        if prop is None:
            return False
        if "select" in flt:
            return (prop.get("select") or {}).get("name") == flt["select"]["equals"]
        if "checkbox" in flt:
            return prop.get("checkbox") is flt["checkbox"]["equals"]
        condition = flt.get("rich_text") or flt.get("title") or {}
        text = _plain(prop.get(prop["type"]))
        if "equals" in condition:
            return text == condition["equals"]
        if "contains" in condition:
            return condition["contains"].lower() in text.lower()
        return False

    def _query(self, body: dict[str, Any]) -> Reply:
        size = min(int(body.get("page_size") or 100), 100)
        found = [
            p
            for p in self.pages.values()
            if not p["archived"] and (not body.get("filter") or self._matches(p, body["filter"]))
        ]
        descending = any(s.get("direction") == "descending" for s in body.get("sorts") or [])
        found.sort(key=lambda p: p["_order"], reverse=descending)
        start = 0
        if body.get("start_cursor"):
            start = next((i for i, p in enumerate(found) if p["id"] == body["start_cursor"]), len(found))
        window = found[start : start + size]
        more = start + size < len(found)
        return Reply(
            200,
            {
                "object": "list",
                "results": [self._public(p) for p in window],
                "has_more": more,
                "next_cursor": found[start + size]["id"] if more else None,
                "type": "page_or_database",
            },
        )
