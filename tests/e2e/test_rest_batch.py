"""POST /api/memory/batch (CreateMemories) through the real Envoy gateway: a 200 with one
result per item in order, a bad item answered with the same error body POST /api/memory
gives it (while the others are stored), and refusals of the whole call (too many items,
a misspelled field) as 400s that store nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Rest, ServerHandle, make_config, start_gateway, start_server

from memsvc.core.memories import MAX_BATCH_ITEMS

pytestmark = pytest.mark.e2e

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator[tuple[ServerHandle, Rest]]:
    server = start_server(make_config(tmp_path_factory.mktemp("rest-batch")))
    gateway = start_gateway(server)
    try:
        yield server, Rest(f"http://127.0.0.1:{gateway.settings.listen_port}")
    finally:
        gateway.stop()
        server.stop()


def count(server: ServerHandle, owner: str) -> int:
    with server.app.database.read() as conn:
        return conn.execute("SELECT count(*) FROM memories WHERE api_key_id = ?", (owner,)).fetchone()[0]


def batch(rest: Rest, memories: list[dict[str, Any]]) -> tuple[int, Any]:
    return rest.call("POST", "/api/memory/batch", {"memories": memories})


def test_a_batch_answers_each_item_and_a_bad_one_gets_its_own_error_in_the_200(env):
    server, rest = env
    good = {
        "apiKeyId": "rest-batch",
        "content": "I prefer dark mode",
        "key": "pref:theme",
        "metadata": {"source": "import", "n": 3},
    }
    bad = {"apiKeyId": "rest-batch", "content": "x", "type": "gossip"}
    other = {"apiKeyId": "rest-batch", "sessionId": "s1", "type": "episodic", "content": "We met in Lisbon"}

    status, body = batch(rest, [good, bad, other])

    assert status == 200, body
    assert (body["storedCount"], body["failedCount"]) == (2, 1)
    first, refused, third = body["results"]
    assert first == {"success": True, "id": first["id"], "created": True, "mergedInto": ""} and third["success"] is True
    single_status, single = rest.call("POST", "/api/memory", bad)
    assert single_status == 400
    assert refused["success"] is False and refused["id"] == "" and refused["created"] is False
    assert refused["error"] == single  # the same {code, message, details} as the item alone
    assert refused["error"]["code"] == 3
    violations = [d for d in refused["error"]["details"] if d["@type"] == BAD_REQUEST][0]["fieldViolations"]
    assert [v["field"] for v in violations] == ["type"]
    stored = {}
    for result in (first, third):
        got_status, stored[result["id"]] = rest.call("GET", f"/api/memory/{result['id']}")
        assert got_status == 200, stored
    assert stored[first["id"]]["key"] == "pref:theme" and stored[first["id"]]["metadata"] == {
        "source": "import",
        "n": 3,
    }
    assert stored[third["id"]]["sessionId"] == "s1" and stored[third["id"]]["type"] == "episodic"
    assert count(server, "rest-batch") == 2

    # The same key again: an upsert in place, reported as CreateMemory reports it.
    status, again = batch(rest, [{**good, "content": "I prefer light mode", "metadata": {"n": 4}}])
    assert status == 200 and again["results"][0]["created"] is False and again["results"][0]["id"] == first["id"]
    assert rest.call("GET", f"/api/memory/{first['id']}")[1]["metadata"] == {"source": "import", "n": 4}
    assert count(server, "rest-batch") == 2


def test_more_than_the_limit_is_a_400_and_stores_nothing(env):
    server, rest = env
    items = [{"apiKeyId": "rest-batch-limit", "content": f"fact {i}"} for i in range(MAX_BATCH_ITEMS + 1)]
    status, body = batch(rest, items)
    assert status == 400 and body["code"] == 3, body
    violations = [d for d in body["details"] if d["@type"] == BAD_REQUEST][0]["fieldViolations"]
    assert [v["field"] for v in violations] == ["memories"] and str(MAX_BATCH_ITEMS) in body["message"]
    status, body = batch(rest, [])
    assert status == 400 and body["code"] == 3, body
    assert count(server, "rest-batch-limit") == 0


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(
            {
                "memories": [
                    {"apiKeyId": "rest-batch-typo", "content": "ok"},
                    {"apiKeyId": "rest-batch-typo", "contnet": "misspelled"},
                ]
            },
            id="in-an-item",
        ),
        pytest.param({"memories": [{"apiKeyId": "rest-batch-typo", "content": "ok"}], "memory": []}, id="top-level"),
    ],
)
def test_an_unknown_field_is_a_400_and_stores_nothing(env, payload):
    server, rest = env
    status, body = rest.call("POST", "/api/memory/batch", payload)
    assert status == 400, body
    assert count(server, "rest-batch-typo") == 0
