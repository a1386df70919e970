"""The engine and its settings over REST through the real Envoy gateway: camelCase JSON in
and out, `false`/`0` printed, validation errors as 400 with `fieldViolations`, the chat
pipeline (extract → inject → retrieve), RetrievePreview's numbers, Summarize's refusals.

Each test gets its own server and Envoy (`rest` fixture): settings are global to a server.
"""

from __future__ import annotations

import math
import re
import time
import urllib.parse
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import Rest
from support.provider_schemas import anthropic_body, anthropic_problems, gemini_body, gemini_problems

pytestmark = pytest.mark.e2e

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
OWNER = "key-rest-engine"
FACTS_TEXT = "I prefer concise answers. I usually answer in bullet points."
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "How should you format answers? concise?"}]}
MEMORY_CONTEXT = re.compile(r"Memory context: .*concise answers", re.DOTALL)
SETTINGS_FIELDS = {
    "enabled",
    "maxTokens",
    "retentionDays",
    "strategy",
    "scope",
    "skillsEnabled",
    "embeddingSource",
    "embeddingProviderModel",
    "customBaseUrl",
    "customModelId",
    "transformersEnabled",
    "staticEnabled",
    "rerankEnabled",
    "rerankProviderModel",
    "vectorStore",
    "primaryBackend",
    "fallbackBackends",
    "backendConfigs",
    "dedupOnWrite",
}
NULLABLE = {"embeddingProviderModel", "customBaseUrl", "customModelId", "rerankProviderModel"}
ITEM_FIELDS = {"id", "type", "key", "content", "score", "tokens", "tier"}
TIERS = {"keyword", "vector", "hybrid-gated-convex", "qdrant", "recent"}


# ---- helpers ---------------------------------------------------------------------------------


def ok(rest: Rest, method: str, path: str, body: Any = None, **kwargs) -> Any:
    status, payload = rest.call(method, path, body, **kwargs)
    assert status == 200, (status, payload)
    return payload


def violations(body: Any) -> dict[str, str]:
    assert isinstance(body, dict), body
    found: dict[str, str] = {}
    for detail in body.get("details", []):
        if detail.get("@type") == BAD_REQUEST:
            found.update({v["field"]: v["description"] for v in detail["fieldViolations"]})
    return found


def assert_400(status: int, body: Any, *fields: str) -> None:
    assert status == 400, (status, body)
    assert body.get("code") == 3, body
    for field in fields:
        assert field in violations(body), body


def enable(rest: Rest, **values: Any) -> dict[str, Any]:
    return ok(rest, "PUT", "/api/settings/memory", {"enabled": True, **values})


def create(rest: Rest, content: str, api_key_id: str = OWNER, **fields: Any) -> str:
    return ok(rest, "POST", "/api/memory", {"apiKeyId": api_key_id, "content": content, **fields})["id"]


def listing(rest: Rest, api_key_id: str = OWNER) -> dict[str, Any]:
    return ok(rest, "GET", "/api/memory?" + urllib.parse.urlencode({"apiKeyId": api_key_id, "limit": 200}))


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def assert_camel_case(value: Any, skip: tuple[str, ...] = ()) -> None:
    """No snake_case key anywhere in a response (the chat body inside Inject is the caller's)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            assert "_" not in key, key
            if key not in skip:
                assert_camel_case(inner, skip)
    elif isinstance(value, list):
        for inner in value:
            assert_camel_case(inner, skip)


# ---- settings --------------------------------------------------------------------------------


def test_settings_round_trip_in_camel_case(rest):
    got = ok(rest, "GET", "/api/settings/memory")
    assert got["enabled"] is False and got["maxTokens"] == 2000 and got["retentionDays"] == 30
    assert got["strategy"] == "hybrid" and got["scope"] == "apiKey" and got["primaryBackend"] == "local"
    assert got["fallbackBackends"] == [] and got["backendConfigs"] == {}
    assert SETTINGS_FIELDS - NULLABLE <= set(got) <= SETTINGS_FIELDS
    assert all(got.get(name) is None for name in NULLABLE)

    values = {
        "enabled": True,
        "maxTokens": 1500,
        "retentionDays": 45,
        "strategy": "semantic",
        "scope": "session",
        "skillsEnabled": True,
        "customBaseUrl": "https://embeddings.example.com/v1",
        "customModelId": "m-1",
        "embeddingProviderModel": "openai/text-embedding-3-small",
        "vectorStore": "local",
        "fallbackBackends": ["local"],
        "backendConfigs": {"sqlite": {"n": 1, "tags": ["a"]}},
    }
    put = ok(rest, "PUT", "/api/settings/memory", values)
    assert {k: put[k] for k in values} == values
    assert_camel_case(put, skip=("backendConfigs",))
    assert ok(rest, "GET", "/api/settings/memory") == put

    off = ok(rest, "PUT", "/api/settings/memory", {"enabled": False, "maxTokens": 0, "customModelId": ""})
    assert "enabled" in off and off["enabled"] is False, "false is printed, not omitted"
    assert off["maxTokens"] == 0 and off.get("customModelId") is None
    got = ok(rest, "GET", "/api/settings/memory")
    assert "enabled" in got and got["enabled"] is False and got["maxTokens"] == 0
    assert got["skillsEnabled"] is True and got["retentionDays"] == 45


def test_settings_validation_errors_are_400_with_field_violations(rest):
    status, body = rest.call("PUT", "/api/settings/memory", {"maxTokens": 20001})
    assert_400(status, body, "maxTokens")

    status, body = rest.call(
        "PUT",
        "/api/settings/memory",
        {"maxTokens": 20001, "enabled": "yes", "bogus": 1, "strategy": "x", "scope": "apiKey"},
    )
    assert_400(status, body, "maxTokens", "enabled", "bogus", "strategy")
    assert "scope" not in violations(body)

    for url in (
        "https://user:pass@example.com/v1",
        "https://example.com/v1?k=1",
        "file:///etc/passwd",
        "http://169.254.169.254/",
    ):
        status, body = rest.call("PUT", "/api/settings/memory", {"customBaseUrl": url, "enabled": True})
        assert_400(status, body, "customBaseUrl")
        assert url not in str(body)

    got = ok(rest, "GET", "/api/settings/memory")
    assert got["enabled"] is False and got["maxTokens"] == 2000 and got.get("customBaseUrl") is None


# ---- the chat pipeline -----------------------------------------------------------------------


def test_extract_inject_retrieve_in_camel_case(rest):
    enable(rest)
    extracted = ok(rest, "POST", "/api/memory/extract", {"userMessage": FACTS_TEXT, "apiKeyId": OWNER, "wait": True})
    assert extracted["stored"] == 2 and extracted["accepted"] is False and extracted["skippedReason"] == ""
    assert {f["key"] for f in extracted["facts"]} == {"preference:concise_answers", "pattern:answer_in_bullet_points"}
    assert listing(rest)["total"] == 2

    body = {**CHAT, "temperature": 0.3, "stream": True, "x_custom": {"keep": ["me", 1]}}
    injected = ok(rest, "POST", "/api/memory/inject", {"request": body, "provider": "openai", "apiKeyId": OWNER})
    assert injected["injected"] is True and injected["role"] == "system" and injected["skippedReason"] == ""
    messages = injected["request"]["messages"]
    assert len(messages) == 2 and messages[0]["role"] == "system"
    assert MEMORY_CONTEXT.match(messages[0]["content"]), messages[0]
    assert messages[1] == CHAT["messages"][0]
    assert {k: v for k, v in injected["request"].items() if k != "messages"} == {
        k: v for k, v in body.items() if k != "messages"
    }
    assert len(injected["memoryIds"]) == 2 and injected["tokens"] > 0
    assert_camel_case({k: v for k, v in injected.items() if k != "request"})

    user_role = ok(rest, "POST", "/api/memory/inject", {"request": CHAT, "provider": "o1", "apiKeyId": OWNER})
    assert user_role["role"] == "user" and user_role["request"]["messages"][0]["role"] == "user"

    retrieved = ok(
        rest,
        "POST",
        "/api/memory/retrieve",
        {"apiKeyId": OWNER, "query": "concise answers", "maxTokens": 50, "strategy": "hybrid"},
    )
    assert retrieved["memories"][0]["content"] == "User prefers concise answers"
    assert retrieved["totalTokens"] == sum(m["tokens"] for m in retrieved["memories"]) <= 50
    assert retrieved["resolution"]["strategyUsed"]
    assert_camel_case(retrieved)


def test_retrieve_and_preview_show_occurred_at_in_utc_only_when_known(rest):
    """A ranked memory carries occurredAt (when it happened, given in any RFC 3339 offset,
    answered in UTC); one stored without it has no occurredAt key at all."""
    enable(rest)
    said = create(rest, "Mira: the night train to Lisbon was late", occurredAt="2023-12-31T23:59:30.250+01:00")
    unknown = create(rest, "Mira: the night train had a dining car")
    for path, body in (
        ("/api/memory/retrieve", {"apiKeyId": OWNER, "query": "night train"}),
        ("/api/memory/retrieve-preview", {"apiKeyId": OWNER, "query": "night train"}),
    ):
        found = {m["id"]: m for m in ok(rest, "POST", path, body)["memories"]}
        assert set(found) == {said, unknown}, path
        assert found[said]["occurredAt"] == "2023-12-31T22:59:30.250Z", path
        assert "occurredAt" not in found[unknown], path


DB_QUESTION = "Which database will I use for this project?"


def test_inject_anthropic_and_gemini_bodies_and_the_relevance_floor_over_rest(rest):
    """An Anthropic body keeps its system prompt top-level (no system role in messages), a
    Gemini body gets systemInstruction (no provider given: its shape says so); an unrelated
    question injects nothing; limit and minScore are checked as any other field."""
    enable(rest)
    db = ok(
        rest,
        "POST",
        "/api/memory",
        {
            "apiKeyId": OWNER,
            "type": "episodic",
            "key": "decision:db",
            "content": "I will use PostgreSQL for this project",
        },
    )["id"]
    ok(rest, "POST", "/api/memory", {"apiKeyId": OWNER, "content": "User lives in Berlin"})

    anthropic = anthropic_body(DB_QUESTION)
    resp = ok(
        rest,
        "POST",
        "/api/memory/inject",
        {"request": anthropic, "provider": "anthropic", "apiKeyId": OWNER, "limit": 5, "minScore": 0.25},
    )
    assert resp["injected"] is True and resp["format"] == "anthropic" and resp["role"] == "system"
    assert resp["memoryIds"] == [db] and resp["belowMinScore"] >= 0
    assert anthropic_problems(resp["request"]) == []
    assert resp["request"]["messages"] == anthropic["messages"]
    assert resp["request"]["system"] == (
        "Memory context: I will use PostgreSQL for this project\n\n" + anthropic["system"]
    )

    gemini = gemini_body(DB_QUESTION)
    resp = ok(rest, "POST", "/api/memory/inject", {"request": gemini, "apiKeyId": OWNER})
    assert resp["injected"] is True and resp["format"] == "gemini" and resp["memoryIds"] == [db]
    assert gemini_problems(resp["request"]) == []
    assert resp["request"]["contents"] == gemini["contents"]
    assert resp["request"]["systemInstruction"]["parts"][0] == {
        "text": "Memory context: I will use PostgreSQL for this project"
    }

    unrelated = gemini_body("Write a haiku about the ocean at night")
    resp = ok(rest, "POST", "/api/memory/inject", {"request": unrelated, "provider": "gemini", "apiKeyId": OWNER})
    assert resp["injected"] is False and resp["request"] == unrelated and resp["format"] == ""

    floored = ok(rest, "POST", "/api/memory/retrieve", {"apiKeyId": OWNER, "query": DB_QUESTION, "minScore": 0.5})
    assert [m["id"] for m in floored["memories"]] == [db]
    assert "belowMinScore" in floored["resolution"]
    # One word of 19 shared with a memory of three terms: keyword overlap 2/22, below search's 0.10.
    one_word = {
        "apiKeyId": OWNER,
        "query": "please write a long rhyming haiku about stormy grey ocean waves at "
        "midnight, seagulls, lighthouses, foghorns, fishing boats, sailors, "
        "salt spray and PostgreSQL",
    }
    searched = ok(rest, "POST", "/api/memory/retrieve", one_word)
    assert searched["memories"] == [] and searched["resolution"]["belowMinScore"] >= 1  # Retrieve's default floor
    assert (searched["resolution"]["keywordFloor"], searched["resolution"]["vectorFloor"]) == (0.10, 0.25)
    unfloored = ok(rest, "POST", "/api/memory/retrieve", {**one_word, "minScore": 0})
    assert [m["id"] for m in unfloored["memories"]] == [db]
    assert (unfloored["resolution"]["keywordFloor"], unfloored["resolution"]["vectorFloor"]) == (0, 0)
    for field, value in (("limit", 0), ("limit", 101), ("minScore", 1.5), ("minScore", -1)):
        for path, body in (
            ("/api/memory/retrieve", {"apiKeyId": OWNER, "query": DB_QUESTION}),
            ("/api/memory/inject", {"request": gemini, "apiKeyId": OWNER}),
        ):
            status, payload = rest.call("POST", path, {**body, field: value})
            assert_400(status, payload, field)


@pytest.mark.parametrize("how", ["noMemory", "x-omniroute-no-memory", "x-memsvc-no-memory"])
def test_opt_out_through_envoy(rest, how):
    enable(rest)
    ok(rest, "POST", "/api/memory/extract", {"userMessage": FACTS_TEXT, "apiKeyId": OWNER, "wait": True})
    request = {"request": CHAT, "provider": "openai", "apiKeyId": OWNER}
    headers = {}
    if how == "noMemory":
        request["noMemory"] = True
    else:
        headers[how] = "TRUE" if how.startswith("x-omniroute") else "1"
    resp = ok(rest, "POST", "/api/memory/inject", request, headers=headers)
    assert resp["injected"] is False and resp["request"] == CHAT and resp["skippedReason"]
    extra = {"noMemory": True} if how == "noMemory" else {}
    out = ok(
        rest,
        "POST",
        "/api/memory/extract",
        {"userMessage": "I prefer green tea.", "apiKeyId": OWNER, "wait": True, **extra},
        headers=headers,
    )
    assert out["stored"] == 0
    assert listing(rest)["total"] == 2


def test_extract_without_wait_over_rest(rest):
    enable(rest)
    resp = ok(rest, "POST", "/api/memory/extract", {"userMessage": FACTS_TEXT, "apiKeyId": OWNER})
    assert resp["accepted"] is True and resp["stored"] == 0
    deadline = time.monotonic() + 10
    while listing(rest)["total"] < 2:
        assert time.monotonic() < deadline, "background extraction never stored the facts"
        time.sleep(0.05)


def test_inject_with_memory_disabled_returns_the_body(rest):
    resp = ok(rest, "POST", "/api/memory/inject", {"request": CHAT, "provider": "openai", "apiKeyId": OWNER})
    assert resp["injected"] is False and resp["request"] == CHAT and "disabled" in resp["skippedReason"]
    assert resp["memoryIds"] == [] and resp["tokens"] == 0 and resp["role"] == ""


# ---- RetrievePreview -------------------------------------------------------------------------


def test_retrieve_preview_requires_a_query(rest):
    for body in ({"query": ""}, {"query": "   "}, {}, {"apiKeyId": OWNER}):
        status, payload = rest.call("POST", "/api/memory/retrieve-preview", body)
        assert_400(status, payload, "query")


def test_retrieve_preview_on_an_empty_store(rest):
    resp = ok(rest, "POST", "/api/memory/retrieve-preview", {"query": "anything at all"})
    assert resp["memories"] == [] and resp["totalTokensUsed"] == 0 and resp["budgetMaxTokens"] == 2000
    assert set(resp["resolution"]) >= {
        "embeddingSource",
        "embeddingModel",
        "vectorStore",
        "strategyUsed",
        "rerankApplied",
        "fallbackReason",
    }


@pytest.mark.parametrize("strategy", ["recent", "semantic", "hybrid"])
@pytest.mark.parametrize("max_tokens,limit", [(37, 3), (2000, 100), (5, 20), (16000, 1)])
def test_retrieve_preview_numbers(rest, strategy, max_tokens, limit):
    for i in range(12):
        create(rest, f"previewword entry {i} " + "pad " * (i * 3), key=f"entry_{i}")
    create(rest, "previewword for someone else", api_key_id="other-owner")
    resp = ok(
        rest,
        "POST",
        "/api/memory/retrieve-preview",
        {
            "query": "previewword entry",
            "strategy": strategy,
            "maxTokens": max_tokens,
            "limit": limit,
            "apiKeyId": OWNER,
        },
    )
    assert resp["budgetMaxTokens"] == max_tokens
    memories = resp["memories"]
    assert memories, resp
    assert len(memories) <= limit
    assert resp["totalTokensUsed"] == sum(m["tokens"] for m in memories) <= max_tokens
    for m in memories:
        assert set(m) >= ITEM_FIELDS, m
        assert m["tokens"] == tokens(m["content"]) and m["tier"] in TIERS
        assert "someone else" not in m["content"]
    assert_camel_case(resp)


def test_retrieve_preview_limit_and_budget_validation(rest):
    for body, field in (
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": 101}, "limit"),
        ({"query": "x", "maxTokens": 0}, "maxTokens"),
        ({"query": "x", "maxTokens": 16001}, "maxTokens"),
        ({"query": "x", "strategy": "nope"}, "strategy"),
    ):
        status, payload = rest.call("POST", "/api/memory/retrieve-preview", body)
        assert_400(status, payload, field)


# ---- Summarize -------------------------------------------------------------------------------


@pytest.mark.parametrize("days", [0, 366])
def test_summarize_days_out_of_range_is_400(rest, days):
    status, body = rest.call("POST", "/api/memory/summarize", {"olderThanDays": days, "apiKeyId": OWNER})
    assert_400(status, body, "olderThanDays")


def test_summarize_without_owner_is_400_unless_all_tenants(rest):
    status, body = rest.call("POST", "/api/memory/summarize", {"olderThanDays": 30})
    assert_400(status, body, "apiKeyId")
    resp = ok(rest, "POST", "/api/memory/summarize", {"olderThanDays": 30, "allTenants": True, "dryRun": True})
    assert resp["dryRun"] is True and resp["deletedCount"] == 0


def test_summarize_dry_run_over_rest(rest, server):
    for i in range(5):
        create(rest, f"Alpha{i}. Beta{i}. Gamma{i}. Delta{i}.", key=f"fact_{i}")
    old = (datetime.now(UTC) - timedelta(days=60)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with server.app.database.write() as conn:
        conn.execute("UPDATE memories SET created_at = ?", (old,))
    resp = ok(rest, "POST", "/api/memory/summarize", {"apiKeyId": OWNER, "dryRun": True})
    assert resp["dryRun"] is True and resp["deletedCount"] == 0 and len(resp["candidates"]) == 5
    assert "summaryId" not in resp or resp["summaryId"] in (None, "")
    done = ok(rest, "POST", "/api/memory/summarize", {"apiKeyId": OWNER})
    assert done["deletedCount"] == 5 and done["summaryId"]
    rows = listing(rest)["data"]
    assert [r["id"] for r in rows] == [done["summaryId"]] and rows[0]["key"].startswith("summary_")
    assert "Gamma4." in rows[0]["content"] and "Delta" not in rows[0]["content"]
