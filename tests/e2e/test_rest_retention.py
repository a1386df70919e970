"""Retention over REST through the real Envoy gateway: `keep` on POST /api/memory, on
PUT /api/memory/{id} and in the memory JSON, `retentionDays: 0` through the settings route, and `skippedForAge` in the
resolution of POST /api/memory/retrieve."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytestmark = pytest.mark.e2e


def _age(server, memory_id: str, days: int) -> None:
    when = (datetime.now(UTC) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with server.app.database.write() as conn:
        conn.execute("UPDATE memories SET created_at = ? WHERE id = ?", (when, memory_id))


def test_keep_retention_0_and_skipped_for_age_over_rest(server, rest):
    status, _ = rest.call("PUT", "/api/settings/memory", {"enabled": True, "retentionDays": 30})
    assert status == 200
    status, kept = rest.call(
        "POST", "/api/memory", {"apiKeyId": "key-rest-ret", "content": "The user's name is Ada", "keep": True}
    )
    assert status == 200, kept
    status, aged = rest.call("POST", "/api/memory", {"apiKeyId": "key-rest-ret", "content": "Ada booked a dentist"})
    for memory_id in (kept["id"], aged["id"]):
        _age(server, memory_id, 90)
    status, got = rest.call("GET", f"/api/memory/{kept['id']}")
    assert status == 200 and got["keep"] is True

    status, body = rest.call("POST", "/api/memory/retrieve", {"apiKeyId": "key-rest-ret", "query": "Ada"})
    assert status == 200, body
    assert [m["id"] for m in body["memories"]] == [kept["id"]] and body["resolution"]["skippedForAge"] == 1

    status, settings = rest.call("PUT", "/api/settings/memory", {"retentionDays": 0})
    assert status == 200 and settings["retentionDays"] == 0
    status, body = rest.call("POST", "/api/memory/retrieve", {"apiKeyId": "key-rest-ret", "query": "Ada"})
    assert {m["id"] for m in body["memories"]} == {kept["id"], aged["id"]} and body["resolution"]["skippedForAge"] == 0


def test_put_keep_keeps_and_releases_an_existing_memory_over_rest(server, rest):
    status, _ = rest.call("PUT", "/api/settings/memory", {"enabled": True, "retentionDays": 30})
    assert status == 200
    status, made = rest.call("POST", "/api/memory", {"apiKeyId": "key-rest-put", "content": "The user's name is Grace"})
    assert status == 200, made
    _age(server, made["id"], 90)
    status, body = rest.call("POST", "/api/memory/retrieve", {"apiKeyId": "key-rest-put", "query": "Grace"})
    assert body["memories"] == [] and body["resolution"]["skippedForAge"] == 1

    status, updated = rest.call("PUT", f"/api/memory/{made['id']}", {"keep": True})
    assert status == 200, updated
    assert updated["memory"]["keep"] is True and updated["memory"]["content"] == "The user's name is Grace"
    status, body = rest.call("POST", "/api/memory/retrieve", {"apiKeyId": "key-rest-put", "query": "Grace"})
    assert [m["id"] for m in body["memories"]] == [made["id"]] and body["resolution"]["skippedForAge"] == 0

    status, refused = rest.call("PUT", f"/api/memory/{made['id']}", {"keep": "forever"})
    assert status == 400, refused
    status, got = rest.call("GET", f"/api/memory/{made['id']}")
    assert got["keep"] is True, "a refused update changes nothing"

    status, updated = rest.call("PUT", f"/api/memory/{made['id']}", {"keep": False})
    assert status == 200 and updated["memory"].get("keep", False) is False, updated
    status, body = rest.call("POST", "/api/memory/retrieve", {"apiKeyId": "key-rest-put", "query": "Grace"})
    assert body["memories"] == [] and body["resolution"]["skippedForAge"] == 1
