"""Memory backends over REST through the real Envoy gateway: an Obsidian vault as primary
(the Local REST API stand-in on loopback) configured with one settings call, the masked
key, memories landing in the vault, each backend's health in engine status, retrieval
naming the backend; and the memsvc preset fronting a second, real memsvc through its own
Envoy (create, list, update, retrieve and delete all served by the remote, keep sent on
create and update, stored and honoured by the remote's retention; occurredAt sent and read
back)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import Rest, ServerHandle, make_config, start_gateway, start_server
from support.backend_fixtures import notion, obsidian  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e
OWNER = "key-rest-backends"


def ok(rest: Rest, method: str, path: str, body: Any = None) -> Any:
    status, answer = rest.call(method, path, body)
    assert status == 200, (status, answer)
    return answer


def test_obsidian_primary_with_a_notion_fallback_through_envoy(rest, obsidian, notion):
    settings = ok(
        rest,
        "PUT",
        "/api/settings/memory",
        {
            "enabled": True,
            "primaryBackend": "obsidian",
            "fallbackBackends": ["notion"],
            "backendConfigs": {
                "obsidian": {"baseUrl": obsidian.base_url, "apiKey": obsidian.api_key},
                "notion": {"baseUrl": notion.base_url, "apiKey": notion.token, "databaseId": notion.database_id},
            },
        },
    )
    assert settings["backendConfigs"]["obsidian"]["apiKeyMasked"] == "***" + obsidian.api_key[-4:]
    assert obsidian.api_key not in str(settings) and notion.token not in str(settings)
    created = ok(rest, "POST", "/api/memory", {"apiKeyId": OWNER, "content": "Prefers aisle seats"})
    assert obsidian.note(f"memsvc/{created['id']}.md").endswith("\nPrefers aisle seats")
    listed = ok(rest, "GET", f"/api/memory?apiKeyId={OWNER}")
    assert [m["id"] for m in listed["data"]] == [created["id"]]
    found = ok(rest, "POST", "/api/memory/retrieve", {"apiKeyId": OWNER, "query": "aisle seats"})
    assert [m["id"] for m in found["memories"]] == [created["id"]]
    assert found["resolution"]["backend"] == "obsidian" and found["resolution"]["strategyUsed"] == "backend-search"
    notion.down()
    status = ok(rest, "GET", "/api/memory/engine-status")
    assert [(b["name"], b["role"], b["healthy"]) for b in status["backends"]] == [
        ("obsidian", "primary", True),
        ("notion", "fallback", False),
    ]
    assert "could not reach" in status["backends"][1]["error"]
    status, answer = rest.call("PUT", "/api/settings/memory", {"primaryBackend": "nowhere"})
    assert status == 400 and "primaryBackend" in str(answer)


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[ServerHandle, Rest]]:
    handle = start_server(make_config(tmp_path / "remote"))
    gateway = start_gateway(handle)
    yield handle, Rest(f"http://127.0.0.1:{gateway.settings.listen_port}")
    gateway.stop()
    handle.stop()


def test_the_memsvc_preset_fronts_another_memsvc(rest, remote):
    _, far = remote
    ok(far, "PUT", "/api/settings/memory", {"enabled": True})
    ok(
        rest,
        "PUT",
        "/api/settings/memory",
        {
            "enabled": True,
            "primaryBackend": "mirror",
            "backendConfigs": {"mirror": {"type": "memsvc", "baseUrl": far.base}},
        },
    )
    created = ok(rest, "POST", "/api/memory", {"apiKeyId": OWNER, "content": "Speaks Portuguese", "key": "lang"})
    assert [m["content"] for m in ok(far, "GET", f"/api/memory?apiKeyId={OWNER}")["data"]] == ["Speaks Portuguese"]
    ok(rest, "PUT", f"/api/memory/{created['id']}", {"content": "Speaks Portuguese and Spanish"})
    assert ok(far, "GET", f"/api/memory/{created['id']}")["content"] == "Speaks Portuguese and Spanish"
    found = ok(rest, "POST", "/api/memory/retrieve", {"apiKeyId": OWNER, "query": "Spanish"})
    assert [m["id"] for m in found["memories"]] == [created["id"]] and found["resolution"]["backend"] == "mirror"
    status = ok(rest, "GET", "/api/memory/engine-status")["backends"]
    assert status[0]["name"] == "mirror" and status[0]["type"] == "memsvc" and status[0]["healthy"] is True
    ok(rest, "DELETE", f"/api/memory/{created['id']}")
    assert far.call("GET", f"/api/memory/{created['id']}")[0] == 404


def backdate(handle: ServerHandle, memory_id: str, days: int) -> None:
    """Make a memory of the remote `days` old, as the retention tests do with direct SQL."""
    stamp = (datetime.now(UTC) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with handle.app.database.write() as conn:
        conn.execute("UPDATE memories SET created_at = ? WHERE id = ?", (stamp, memory_id))


def test_keep_round_trips_through_the_memsvc_preset(rest, remote):
    handle, far = remote
    ok(far, "PUT", "/api/settings/memory", {"enabled": True, "retentionDays": 30})
    ok(
        rest,
        "PUT",
        "/api/settings/memory",
        {
            "enabled": True,
            "primaryBackend": "mirror",
            "retentionDays": 30,
            "backendConfigs": {"mirror": {"type": "memsvc", "baseUrl": far.base}},
        },
    )
    kept = ok(rest, "POST", "/api/memory", {"apiKeyId": OWNER, "content": "The user's name is Ximena", "keep": True})[
        "id"
    ]
    plain = ok(rest, "POST", "/api/memory", {"apiKeyId": OWNER, "content": "Ximena mentioned a dentist"})["id"]
    for gateway in (far, rest):  # stored by the remote, and read back from it
        assert ok(gateway, "GET", f"/api/memory/{kept}")["keep"] is True
        assert ok(gateway, "GET", f"/api/memory/{plain}")["keep"] is False

    def found() -> set[str]:
        for memory_id in (kept, plain):
            backdate(handle, memory_id, 400)
        answer = ok(rest, "POST", "/api/memory/retrieve", {"apiKeyId": OWNER, "query": "Ximena"})
        assert answer["resolution"]["backend"] == "mirror"
        return {m["id"] for m in answer["memories"]}

    assert found() == {kept}, "the old unkept memory is hidden by retention, the kept one is not"
    assert ok(rest, "PUT", f"/api/memory/{plain}", {"keep": True})["memory"]["keep"] is True
    assert ok(far, "GET", f"/api/memory/{plain}")["keep"] is True and found() == {kept, plain}
    ok(rest, "PUT", f"/api/memory/{kept}", {"content": "The user's name is Ximena Ruiz"})
    assert ok(far, "GET", f"/api/memory/{kept}")["keep"] is True, "an update that does not say keep leaves it"
    assert ok(rest, "PUT", f"/api/memory/{kept}", {"keep": False})["memory"]["keep"] is False
    assert ok(far, "GET", f"/api/memory/{kept}")["keep"] is False and found() == {plain}


def test_occurred_at_round_trips_through_the_memsvc_preset(rest, remote):
    _, far = remote
    ok(
        rest,
        "PUT",
        "/api/settings/memory",
        {"primaryBackend": "mirror", "backendConfigs": {"mirror": {"type": "memsvc", "baseUrl": far.base}}},
    )
    said = ok(
        rest,
        "POST",
        "/api/memory",
        {
            "apiKeyId": OWNER,
            "content": "Ada said she adopted a cat",
            "key": "turn:1",
            "occurredAt": "2023-12-31T18:30:00Z",
        },
    )["id"]
    for gateway in (far, rest):  # stored by the remote, and read back from it
        assert ok(gateway, "GET", f"/api/memory/{said}")["occurredAt"] == "2023-12-31T18:30:00Z"
    ok(rest, "POST", "/api/memory", {"apiKeyId": OWNER, "content": "Ada said she adopted a black cat", "key": "turn:1"})
    assert ok(far, "GET", f"/api/memory/{said}")["occurredAt"] == "2023-12-31T18:30:00Z", (
        "an upsert without it keeps it"
    )
    moved = ok(rest, "PUT", f"/api/memory/{said}", {"occurredAt": "2024-01-01T08:00:00Z"})["memory"]
    assert moved["occurredAt"] == "2024-01-01T08:00:00Z"
    assert ok(far, "GET", f"/api/memory/{said}")["occurredAt"] == "2024-01-01T08:00:00Z"
