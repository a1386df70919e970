"""Memory CRUD over REST through the real Envoy gateway: camelCase JSON, upsert, refusals that
change nothing, listing filters/stats/paging, clearing, the health probe, validation limits,
the FTS index following the rows, and the error body shape.

Most tests share one server + Envoy (module scope) and keep apart by using their own
apiKeyIds; row counts are compared before/after, never absolutely across the table.
"""

from __future__ import annotations

import math
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import Rest, ServerHandle, make_config, start_gateway, start_server

pytestmark = pytest.mark.e2e

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
FAR_FUTURE = "2099-01-02T03:04:05Z"


@dataclass
class Env:
    server: ServerHandle
    rest: Rest

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.server.app.database.read() as conn:
            return [tuple(row) for row in conn.execute(query, params).fetchall()]

    def count(self, api_key_id: str | None = None) -> int:
        if api_key_id is None:
            return self.sql("SELECT count(*) FROM memories")[0][0]
        return self.sql("SELECT count(*) FROM memories WHERE api_key_id = ?", (api_key_id,))[0][0]

    def row(self, memory_id: str) -> tuple[Any, ...] | None:
        rows = self.sql("SELECT * FROM memories WHERE id = ?", (memory_id,))
        return rows[0] if rows else None

    def fts(self, word: str) -> list[int]:
        return [r[0] for r in self.sql("SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?", (f'"{word}"',))]

    def internal_id(self, memory_id: str) -> int:
        return self.sql("SELECT memory_id FROM memories WHERE id = ?", (memory_id,))[0][0]

    def create(self, **fields: Any) -> str:
        status, body = self.rest.call("POST", "/api/memory", fields)
        assert status == 200, body
        assert body["success"] is True, body
        return body["id"]

    def list(self, **query: Any) -> dict[str, Any]:
        status, body = self.rest.call("GET", "/api/memory?" + urllib.parse.urlencode(query))
        assert status == 200, body
        return body


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    handle = start_server(make_config(tmp_path_factory.mktemp("rest-memories")))
    try:
        gateway = start_gateway(handle)
    except BaseException:
        handle.stop()
        raise
    try:
        yield Env(handle, Rest(f"http://127.0.0.1:{gateway.settings.listen_port}"))
    finally:
        gateway.stop()
        handle.stop()


@pytest.fixture
def owner() -> str:
    """An apiKeyId no other test uses."""
    return f"owner-{uuid.uuid4().hex[:12]}"


def word() -> str:
    """A token that appears in no other memory (for FTS checks)."""
    return "zq" + uuid.uuid4().hex[:10]


def parse_rfc3339(value: Any) -> datetime:
    assert isinstance(value, str), value
    assert value.endswith("Z"), value
    parsed = datetime.fromisoformat(value[:-1] + "+00:00")
    assert parsed.tzinfo is not None
    return parsed


def violations(body: Any) -> dict[str, str]:
    """field → description of the BadRequest detail of an error body."""
    assert isinstance(body, dict), body
    found: dict[str, str] = {}
    for detail in body.get("details", []):
        if detail.get("@type") == BAD_REQUEST:
            for v in detail["fieldViolations"]:
                found[v["field"]] = v["description"]
    return found


def assert_bad_request(status: int, body: Any, field: str) -> None:
    assert status == 400, body
    assert isinstance(body, dict) and body.get("code") == 3, body
    assert field in violations(body), body


def error_reasons(body: Any) -> list[str]:
    return [d["reason"] for d in body.get("details", []) if d.get("@type") == ERROR_INFO]


# ---- CRUD round trip ------------------------------------------------------------------------

METADATA = {
    "n": 3,
    "big": 1234567,
    "neg": -2,
    "ratio": 1.5,
    "flag": True,
    "none": None,
    "name": "x",
    "nested": {"list": [1, 2, 3], "deep": {"k": 7}},
}


def test_crud_round_trip(env: Env, owner: str) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    status, created = env.rest.call(
        "POST",
        "/api/memory",
        {
            "apiKeyId": owner,
            "sessionId": "sess-1",
            "type": "episodic",
            "key": "pref:lang",
            "content": "The user writes Rust",
            "metadata": METADATA,
            "expiresAt": FAR_FUTURE,
        },
    )
    assert status == 200, created
    assert created["success"] is True and created["created"] is True, created
    memory_id = created["id"]
    assert str(uuid.UUID(memory_id)) == memory_id
    assert set(created) == {"success", "id", "created", "mergedInto"} and created["mergedInto"] == ""

    status, got = env.rest.call("GET", f"/api/memory/{memory_id}")
    assert status == 200, got
    assert got["id"] == memory_id
    assert got["apiKeyId"] == owner
    assert got["sessionId"] == "sess-1"
    assert got["type"] == "episodic"
    assert got["key"] == "pref:lang"
    assert got["content"] == "The user writes Rust"
    assert got["accessCount"] == 0
    assert "api_key_id" not in got and "created_at" not in got  # camelCase only
    created_at = parse_rfc3339(got["createdAt"])
    assert before <= created_at <= datetime.now(UTC) + timedelta(seconds=5)
    assert parse_rfc3339(got["updatedAt"]) >= created_at
    assert parse_rfc3339(got["expiresAt"]) == datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC)
    # Metadata round-trips, integers staying integers (on the wire and in storage).
    assert got["metadata"] == METADATA
    for name in ("n", "big", "neg"):
        assert type(got["metadata"][name]) is int, got["metadata"]
    assert type(got["metadata"]["nested"]["list"][0]) is int
    assert env.sql(
        "SELECT json_type(metadata, '$.n'), json_type(metadata, '$.ratio') FROM memories WHERE id = ?", (memory_id,)
    ) == [("integer", "real")]

    new_meta = {"n": 4, "tag": "updated"}
    status, updated = env.rest.call(
        "PUT", f"/api/memory/{memory_id}", {"content": "The user writes TypeScript", "metadata": new_meta}
    )
    assert status == 200, updated
    assert updated["success"] is True
    assert updated["memory"]["id"] == memory_id
    assert updated["memory"]["content"] == "The user writes TypeScript"
    assert updated["memory"]["metadata"] == new_meta

    status, got2 = env.rest.call("GET", f"/api/memory/{memory_id}")
    assert status == 200, got2
    assert got2["content"] == "The user writes TypeScript"
    assert got2["metadata"] == new_meta
    assert type(got2["metadata"]["n"]) is int
    # Untouched fields stay as they were.
    assert (got2["apiKeyId"], got2["sessionId"], got2["type"], got2["key"], got2["createdAt"], got2["expiresAt"]) == (
        owner,
        "sess-1",
        "episodic",
        "pref:lang",
        got["createdAt"],
        got["expiresAt"],
    )
    assert parse_rfc3339(got2["updatedAt"]) >= parse_rfc3339(got["updatedAt"])

    status, deleted = env.rest.call("DELETE", f"/api/memory/{memory_id}")
    assert (status, deleted) == (200, {"success": True})
    assert env.row(memory_id) is None

    status, gone = env.rest.call("GET", f"/api/memory/{memory_id}")
    assert status == 404, gone
    assert gone["code"] == 5
    assert isinstance(gone["message"], str) and gone["message"]
    assert "NOT_FOUND" in error_reasons(gone), gone

    status, again = env.rest.call("DELETE", f"/api/memory/{memory_id}")
    assert status == 404, again
    assert again["code"] == 5 and "NOT_FOUND" in error_reasons(again), again


def test_occurred_at_round_trips_and_a_future_one_is_400(env: Env, owner: str) -> None:
    """occurredAt (when the recorded thing happened) is taken in any RFC 3339 offset, answered
    in UTC beside createdAt, changed by PUT; one more than a day ahead is refused, nothing stored."""
    memory_id = env.create(
        apiKeyId=owner, content="Mira: we watched the fireworks", occurredAt="2023-12-31T23:59:30.250+01:00"
    )
    status, got = env.rest.call("GET", f"/api/memory/{memory_id}")
    assert status == 200, got
    assert parse_rfc3339(got["occurredAt"]) == datetime(2023, 12, 31, 22, 59, 30, 250000, tzinfo=UTC)
    assert parse_rfc3339(got["createdAt"]) > datetime(2025, 1, 1, tzinfo=UTC)
    status, updated = env.rest.call("PUT", f"/api/memory/{memory_id}", {"occurredAt": "2024-01-01T00:00:10Z"})
    assert status == 200 and updated["memory"]["occurredAt"] == "2024-01-01T00:00:10Z", updated
    status, answer = env.rest.call("POST", "/api/memory", {"apiKeyId": owner, "content": "x", "occurredAt": FAR_FUTURE})
    assert_bad_request(status, answer, "occurredAt")
    assert violations(answer)["occurredAt"] == "is in the future"
    assert env.count(owner) == 1


def test_missing_ids_are_404(env: Env) -> None:
    missing = str(uuid.uuid4())
    for method, body in (("GET", None), ("DELETE", None), ("PUT", {"content": "x"})):
        status, answer = env.rest.call(method, f"/api/memory/{missing}", body)
        assert status == 404, (method, answer)
        assert answer["code"] == 5 and "NOT_FOUND" in error_reasons(answer), (method, answer)


def test_create_same_key_twice_upserts_one_row(env: Env, owner: str) -> None:
    status, first = env.rest.call(
        "POST", "/api/memory", {"apiKeyId": owner, "key": "fav-color", "content": "blue", "metadata": {"a": 1, "b": 2}}
    )
    assert status == 200 and first["created"] is True, first
    status, second = env.rest.call(
        "POST",
        "/api/memory",
        {"apiKeyId": owner, "key": "fav-color", "content": "green", "type": "semantic", "metadata": {"b": 3, "c": 4}},
    )
    assert status == 200, second
    assert second["success"] is True
    assert second["created"] is False  # printed although false (always_print_primitive_fields)
    assert second["id"] == first["id"]

    listing = env.list(apiKeyId=owner)
    assert listing["total"] == 1 and len(listing["data"]) == 1, listing
    assert env.count(owner) == 1
    row = listing["data"][0]
    assert row["content"] == "green" and row["type"] == "semantic"
    assert row["metadata"] == {"a": 1, "b": 3, "c": 4}  # shallow merge, new keys win

    # The same key under another owner is another row.
    other = owner + "-other"
    status, third = env.rest.call("POST", "/api/memory", {"apiKeyId": other, "key": "fav-color", "content": "red"})
    assert status == 200 and third["created"] is True and third["id"] != first["id"], third
    assert env.count(owner) == 1 and env.count(other) == 1


# ---- refused updates change nothing ---------------------------------------------------------


@pytest.mark.parametrize(
    "body, field",
    [
        ({"expiresAt": FAR_FUTURE}, "expiresAt"),
        ({"content": "sneaky new content", "expiresAt": FAR_FUTURE}, "expiresAt"),
        ({"type": "bogus"}, "type"),
        ({"content": "also new", "type": "bogus"}, "type"),
        ({"apiKeyId": "someone-else"}, "apiKeyId"),
        ({"sessionId": "other-session"}, "sessionId"),
        ({"createdAt": "2001-01-01T00:00:00Z"}, "createdAt"),
        ({"accessCount": 5}, "accessCount"),
        ({"content": "a" * (32 * 1024 + 1)}, "content"),
        ({"content": "   "}, "content"),
        ({"key": "k" * 513}, "key"),
        ({"metadata": {"x": "a" * (16 * 1024)}}, "metadata"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_refused_update_leaves_the_row_unchanged(env: Env, owner: str, body: dict[str, Any], field: str) -> None:
    memory_id = env.create(apiKeyId=owner, sessionId="s", key="k1", content="original content", metadata={"keep": 1})
    status, before = env.rest.call("GET", f"/api/memory/{memory_id}")
    assert status == 200
    row_before = env.row(memory_id)

    status, answer = env.rest.call("PUT", f"/api/memory/{memory_id}", body)
    assert_bad_request(status, answer, field)

    assert env.row(memory_id) == row_before  # storage itself, not only the read cache
    status, after = env.rest.call("GET", f"/api/memory/{memory_id}")
    assert status == 200
    assert after == before


def test_update_to_a_key_taken_by_another_memory_is_409(env: Env, owner: str) -> None:
    first = env.create(apiKeyId=owner, key="taken", content="one")
    second = env.create(apiKeyId=owner, key="free", content="two")
    row_before = env.row(second)
    status, body = env.rest.call("PUT", f"/api/memory/{second}", {"key": "taken"})
    assert status == 409, body
    assert body["code"] == 10, body  # ABORTED
    assert "DUPLICATE_KEY" in error_reasons(body), body
    assert env.row(second) == row_before
    assert env.row(first) is not None


# ---- listing --------------------------------------------------------------------------------


def test_list_filters_by_owner_and_q_before_stats(env: Env) -> None:
    tag = uuid.uuid4().hex[:8]
    key_a, key_b = f"key-a-{tag}", f"key-b-{tag}"
    rows_a = [
        ("I write TypeScript daily", "factual", None),  # match (content)
        ("typescript generics are neat", "procedural", None),  # match (lower case)
        ("TYPESCRIPT strict mode saved me.", "episodic", None),  # match (upper case)
        ("favourite language", "semantic", "lang:TypeScript"),  # match (key only)
        ("Rust and Python", "factual", None),  # no match
        ("Go is simple!", "factual", "lang:go"),  # no match
    ]
    for content, type_, key in rows_a:
        fields = {"apiKeyId": key_a, "content": content, "type": type_}
        if key:
            fields["key"] = key
        env.create(**fields)
    env.create(apiKeyId=key_b, content="TypeScript in b", type="factual")
    env.create(apiKeyId=key_b, content="more typescript in b", type="semantic")

    listing = env.list(apiKeyId=key_a, q="typescript")
    matches = [r for r in rows_a if "typescript" in r[0].lower() or "typescript" in (r[2] or "").lower()]
    assert len(matches) == 4
    assert listing["total"] == 4
    assert sorted(m["content"] for m in listing["data"]) == sorted(r[0] for r in matches)
    assert all(m["apiKeyId"] == key_a for m in listing["data"])
    stats = listing["stats"]
    assert stats["total"] == 4
    assert stats["byType"] == {"factual": 1, "procedural": 1, "episodic": 1, "semantic": 1}
    assert stats["tokensUsed"] == sum(math.ceil(len(r[0]) / 4) for r in matches)

    # Without q the same owner has all six; key-b is never mixed in.
    everything = env.list(apiKeyId=key_a)
    assert everything["total"] == 6 and everything["stats"]["byType"]["factual"] == 3
    assert everything["stats"]["tokensUsed"] == sum(math.ceil(len(r[0]) / 4) for r in rows_a)
    assert env.list(apiKeyId=key_b, q="TYPESCRIPT")["total"] == 2

    # Type and q together.
    typed = env.list(apiKeyId=key_a, q="TypeScript", type="procedural")
    assert [m["content"] for m in typed["data"]] == ["typescript generics are neat"]
    assert typed["stats"]["byType"] == {"factual": 0, "procedural": 1, "episodic": 0, "semantic": 0}


def test_q_is_a_literal_unicode_case_insensitive_substring(env: Env, owner: str) -> None:
    for content in ("100% sure", "abc", "ÄPFEL essen", "Straße"):
        env.create(apiKeyId=owner, content=content)

    def contents(q: str) -> list[str]:
        return sorted(m["content"] for m in env.list(apiKeyId=owner, q=q)["data"])

    assert contents("%") == ["100% sure"]
    assert contents("_") == []
    assert contents("a_c") == []
    assert contents("1%e") == []
    assert contents("äpfel") == ["ÄPFEL essen"]
    assert contents("ÄPFEL") == ["ÄPFEL essen"]
    assert contents("STRASSE") == ["Straße"]


def test_paging_with_limit_and_offset(env: Env, owner: str) -> None:
    ids = [env.create(apiKeyId=owner, content=f"row {i}") for i in range(3)]
    newest_first = list(reversed(ids))

    listing = env.list(apiKeyId=owner, limit=1, offset=1)
    assert len(listing["data"]) == 1
    assert listing["data"][0]["id"] == newest_first[1]
    assert (listing["total"], listing["page"], listing["limit"], listing["totalPages"]) == (3, 2, 1, 3)

    by_page = env.list(apiKeyId=owner, limit=1, page=3)
    assert [m["id"] for m in by_page["data"]] == [newest_first[2]]
    assert by_page["page"] == 3

    offset_wins = env.list(apiKeyId=owner, limit=1, page=3, offset=0)
    assert [m["id"] for m in offset_wins["data"]] == [newest_first[0]]
    assert offset_wins["page"] == 1

    past_the_end = env.list(apiKeyId=owner, limit=2, page=5)
    assert past_the_end["data"] == [] and past_the_end["total"] == 3 and past_the_end["totalPages"] == 2

    default = env.list(apiKeyId=owner)
    assert default["limit"] == 50 and default["page"] == 1 and default["totalPages"] == 1
    assert [m["id"] for m in default["data"]] == newest_first


@pytest.mark.parametrize(
    "query, field",
    [
        ("limit=201", "limit"),
        ("limit=0", "limit"),
        ("limit=-1", "limit"),
        ("page=0", "page"),
        ("offset=-1", "offset"),
        ("type=bogus", "type"),
    ],
)
def test_bad_paging_or_filter_is_400(env: Env, query: str, field: str) -> None:
    status, body = env.rest.call("GET", f"/api/memory?apiKeyId=paging&{query}")
    assert_bad_request(status, body, field)


def test_limit_200_is_accepted(env: Env) -> None:
    status, body = env.rest.call("GET", "/api/memory?apiKeyId=paging&limit=200")
    assert status == 200, body
    assert body["limit"] == 200


def test_primitive_fields_are_printed(rest: Rest, server: ServerHandle) -> None:
    """On a fresh server (conftest's function-scoped fixtures) every counter is 0, and the
    zeros are printed rather than left out."""
    status, created = rest.call("POST", "/api/memory", {"apiKeyId": "prim", "content": "zero counters"})
    assert status == 200, created
    status, listing = rest.call("GET", "/api/memory?apiKeyId=prim")
    assert status == 200, listing
    stats = listing["stats"]
    assert "hitRate" in stats and stats["hitRate"] == 0
    assert stats["cacheStats"] == {"hits": 0, "misses": 0, "size": 0}
    item = listing["data"][0]
    assert "accessCount" in item and item["accessCount"] == 0
    status, empty = rest.call("GET", "/api/memory?apiKeyId=nobody")
    assert status == 200
    assert (empty["total"], empty["totalPages"], empty["stats"]["tokensUsed"]) == (0, 0, 0)
    assert empty["data"] == []
    status, cleared = rest.call("DELETE", "/api/memory?apiKeyId=nobody")
    assert (status, cleared) == (200, {"success": True, "deletedCount": 0})


def test_read_cache_counts_show_in_stats(env: Env, owner: str) -> None:
    memory_id = env.create(apiKeyId=owner, content="cached")
    before = env.list(apiKeyId=owner)["stats"]["cacheStats"]
    for _ in range(2):
        status, _body = env.rest.call("GET", f"/api/memory/{memory_id}")
        assert status == 200
    after = env.list(apiKeyId=owner)["stats"]
    assert after["cacheStats"]["hits"] >= before["hits"] + 1
    assert after["cacheStats"]["misses"] >= before["misses"] + 1
    assert 0 < after["hitRate"] <= 1


# ---- clearing -------------------------------------------------------------------------------


def test_clear_memories_of_one_owner(env: Env) -> None:
    tag = uuid.uuid4().hex[:8]
    key_a, key_b = f"key-a-{tag}", f"key-b-{tag}"
    words_a = [word() for _ in range(3)]
    for i, w in enumerate(words_a):
        env.create(apiKeyId=key_a, content=f"a memory {w}", key=f"k{i}")
    for i in range(2):
        env.create(apiKeyId=key_b, content=f"b memory {i}", key=f"k{i}")
    total_before = env.count()

    status, body = env.rest.call("DELETE", f"/api/memory?apiKeyId={key_a}")
    assert (status, body) == (200, {"success": True, "deletedCount": 3})
    assert env.list(apiKeyId=key_a)["total"] == 0
    assert env.list(apiKeyId=key_b)["total"] == 2
    assert env.count() == total_before - 3
    for w in words_a:
        assert env.fts(w) == []  # their index rows went with them

    status, again = env.rest.call("DELETE", f"/api/memory?apiKeyId={key_a}")
    assert (status, again) == (200, {"success": True, "deletedCount": 0})


def test_clear_with_filters(env: Env, owner: str) -> None:
    env.create(apiKeyId=owner, content="e1", type="episodic", sessionId="s1")
    env.create(apiKeyId=owner, content="e2", type="episodic", sessionId="s2")
    env.create(apiKeyId=owner, content="f1", type="factual", sessionId="s1")
    status, body = env.rest.call("DELETE", f"/api/memory?apiKeyId={owner}&type=episodic&sessionId=s1")
    assert (status, body) == (200, {"success": True, "deletedCount": 1})
    assert sorted(m["content"] for m in env.list(apiKeyId=owner)["data"]) == ["e2", "f1"]

    cutoff = datetime.now(UTC) + timedelta(days=1)
    status, body = env.rest.call(
        "DELETE", f"/api/memory?apiKeyId={owner}&olderThan=" + urllib.parse.quote(cutoff.strftime("%Y-%m-%dT%H:%M:%SZ"))
    )
    assert (status, body) == (200, {"success": True, "deletedCount": 2})
    status, body = env.rest.call("DELETE", f"/api/memory?apiKeyId={owner}&olderThan=2000-01-01T00:00:00Z")
    assert (status, body) == (200, {"success": True, "deletedCount": 0})


def test_clear_without_owner_is_400_and_deletes_nothing(env: Env, owner: str) -> None:
    env.create(apiKeyId=owner, content="survives")
    total = env.count()
    for path in ("/api/memory", "/api/memory?type=factual", "/api/memory?apiKeyId="):
        status, body = env.rest.call("DELETE", path)
        assert_bad_request(status, body, "apiKeyId")
    assert env.count() == total
    assert env.count(owner) == 1


# ---- health ---------------------------------------------------------------------------------


def test_health_round_trip(env: Env) -> None:
    total = env.count()
    status, body = env.rest.call("GET", "/api/memory/health")
    assert status == 200, body
    assert body["working"] is True
    assert type(body["latencyMs"]) is int and body["latencyMs"] >= 0
    assert "error" not in body
    assert env.count() == total  # the probe leaves nothing behind


# ---- validation limits ----------------------------------------------------------------------

KIB = 1024


@pytest.mark.parametrize(
    "fields, ok, field",
    [
        ({"content": "a" * (32 * KIB)}, True, "content"),
        ({"content": "a" * (32 * KIB + 1)}, False, "content"),
        ({"content": "é" * (16 * KIB)}, True, "content"),  # 32 KiB of UTF-8
        ({"content": "é" * (16 * KIB) + "a"}, False, "content"),  # one byte over
        ({"content": "x", "key": "k" * 512}, True, "key"),
        ({"content": "x", "key": "k" * 513}, False, "key"),
        ({"content": "x", "key": "é" * 512}, True, "key"),  # characters, not bytes
        ({"content": "x", "metadata": {"x": "a" * (16 * KIB - 8)}}, True, "metadata"),  # {"x":"…"} = 16 KiB
        ({"content": "x", "metadata": {"x": "a" * (16 * KIB - 7)}}, False, "metadata"),
        ({"content": "x", "metadata": {"x": "a" * (20 * KIB)}}, False, "metadata"),
        ({"content": ""}, False, "content"),
        ({"content": "x", "type": "bogus"}, False, "type"),
        ({"content": "x", "expiresAt": "2001-01-01T00:00:00Z"}, False, "expiresAt"),
    ],
    ids=[
        "content-32KiB",
        "content-32KiB+1",
        "content-utf8-32KiB",
        "content-utf8-32KiB+1",
        "key-512",
        "key-513",
        "key-512-multibyte",
        "metadata-16KiB",
        "metadata-16KiB+1",
        "metadata-20KiB",
        "content-empty",
        "type-bogus",
        "expiresAt-past",
    ],
)
def test_create_validation_limits(env: Env, owner: str, fields: dict[str, Any], ok: bool, field: str) -> None:
    total = env.count()
    status, body = env.rest.call("POST", "/api/memory", {"apiKeyId": owner, **fields})
    if ok:
        assert status == 200, body
        assert env.count() == total + 1
        status, got = env.rest.call("GET", f"/api/memory/{body['id']}")
        assert status == 200
        for name, value in fields.items():
            assert got[name] == value
    else:
        assert_bad_request(status, body, field)
        assert env.count() == total
        assert env.count(owner) == 0


def test_missing_owner_and_content_are_reported_together(env: Env) -> None:
    total = env.count()
    status, body = env.rest.call("POST", "/api/memory", {"type": "factual"})
    assert status == 400, body
    assert {"apiKeyId", "content"} <= set(violations(body)), body
    assert env.count() == total


# ---- FTS follows the rows -------------------------------------------------------------------


def test_fts_follows_create_update_delete(env: Env, owner: str) -> None:
    old, new, key_word = word(), word(), word()
    memory_id = env.create(apiKeyId=owner, content=f"the {old} sleeps")
    internal = env.internal_id(memory_id)
    assert env.fts(old) == [internal]

    status, body = env.rest.call("PUT", f"/api/memory/{memory_id}", {"content": f"the {new} runs"})
    assert status == 200, body
    assert env.internal_id(memory_id) == internal
    assert env.fts(old) == []
    assert env.fts(new) == [internal]

    status, body = env.rest.call("PUT", f"/api/memory/{memory_id}", {"key": f"key {key_word}"})
    assert status == 200, body
    assert env.fts(key_word) == [internal]
    assert env.fts(new) == [internal]

    status, body = env.rest.call("DELETE", f"/api/memory/{memory_id}")
    assert status == 200, body
    assert env.fts(new) == []
    assert env.fts(key_word) == []


def test_fts_follows_upsert(env: Env, owner: str) -> None:
    old, new = word(), word()
    first = env.create(apiKeyId=owner, key="upserted", content=f"about {old}")
    second = env.create(apiKeyId=owner, key="upserted", content=f"about {new}")
    assert first == second
    internal = env.internal_id(first)
    assert env.fts(old) == []
    assert env.fts(new) == [internal]


def test_refused_update_leaves_fts_unchanged(env: Env, owner: str) -> None:
    kept, attempted = word(), word()
    memory_id = env.create(apiKeyId=owner, content=f"kept {kept}")
    status, body = env.rest.call(
        "PUT", f"/api/memory/{memory_id}", {"content": f"attempted {attempted}", "expiresAt": FAR_FUTURE}
    )
    assert status == 400, body
    assert env.fts(kept) == [env.internal_id(memory_id)]
    assert env.fts(attempted) == []


# ---- error body shape -----------------------------------------------------------------------


def test_400_error_body_shape(env: Env) -> None:
    status, body = env.rest.call("POST", "/api/memory", {"apiKeyId": "shape", "content": "x", "type": "nope"})
    assert status == 400
    assert isinstance(body, dict), body
    assert set(body) == {"code", "message", "details"}, body
    assert body["code"] == 3
    assert isinstance(body["message"], str) and "type" in body["message"]
    bad = [d for d in body["details"] if d["@type"] == BAD_REQUEST]
    assert len(bad) == 1, body
    assert bad[0]["fieldViolations"] and all(
        isinstance(v["field"], str) and isinstance(v["description"], str) and v["description"]
        for v in bad[0]["fieldViolations"]
    )
    assert [v["field"] for v in bad[0]["fieldViolations"]] == ["type"]


def test_404_error_body_shape(env: Env) -> None:
    status, body = env.rest.call("GET", f"/api/memory/{uuid.uuid4()}")
    assert status == 404
    assert set(body) == {"code", "message", "details"}, body
    assert body["code"] == 5
    info = [d for d in body["details"] if d["@type"] == ERROR_INFO]
    assert len(info) == 1 and info[0]["reason"] == "NOT_FOUND" and info[0]["domain"] == "memsvc", body
