"""The engine through the SDK and the real server: retrieve, inject in every provider format,
extract, settings get/update, and reindex's progress stream to done (a small local static
model, tests/support/vectors.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import ServerHandle, Stubs
from memsvc_client import (
    FailedPrecondition,
    InvalidArgument,
    MemorySettings,
    Memsvc,
    ReindexProgress,
    RetrieveResult,
)

from tests.sdk.servers import address
from tests.support.provider_schemas import VALIDATORS, anthropic_body, chat_body, gemini_body, responses_body
from tests.support.vectors import STATIC_NAME, static_model, warm  # noqa: F401 - fixture

DB_MEMORY = "I will use PostgreSQL for this project"
DB_QUESTION = "Which database will I use for this project?"
OTHERS = ["User prefers concise answers", "User has a dog named Rex", "User lives in Berlin"]
MEMORY_PREFIX = "Memory context: "


@pytest.fixture
def stored(memsvc: Memsvc) -> str:
    """The owner's PostgreSQL memory (its id) and three unrelated ones; keyword retrieval."""
    db_id = memsvc.memories.add(DB_MEMORY, key="decision:db", type="episodic").id
    memsvc.memories.add_many(OTHERS)
    return db_id


# ---- retrieve ----------------------------------------------------------------------------------


def test_retrieve_ranks_the_relevant_memory_first_and_reports_how(memsvc: Memsvc, stored: str) -> None:
    result = memsvc.retrieve(DB_QUESTION)
    assert isinstance(result, RetrieveResult) and len(result) >= 1
    best = result.memories[0]
    assert (best.id, best.content, best.key, best.type) == (stored, DB_MEMORY, "decision:db", "episodic")
    assert best.score > 0 and best.tokens > 0 and best.tier == "keyword" and best.fts_score is not None
    assert best.vec_score is None  # no embedding source: the vector list did not run
    assert result.total_tokens >= best.tokens
    resolution = result.resolution
    assert (resolution.embedding_source, resolution.vector_store, resolution.backend) == ("none", "none", "sqlite")
    assert resolution.fallback_reason.startswith("auto: no embedding source") and resolution.keyword_floor == 0.1
    assert [m.id for m in result] == [m.id for m in result.memories]


def test_retrieve_limits_and_strategies(memsvc: Memsvc, stored: str) -> None:
    recent = memsvc.retrieve("", strategy="recent", limit=2)
    assert [m.content for m in recent] == ["User lives in Berlin", "User has a dog named Rex"]
    assert recent.resolution.strategy_used in ("recent", "exact")  # one strategy, two names
    assert len(memsvc.retrieve("", strategy="recent", max_tokens=8)) == 1  # the budget cuts
    assert memsvc.retrieve("haiku about the ocean", min_score=0.9).memories == ()


def test_retrieve_reads_only_the_owner_s_memories(memsvc: Memsvc, stored: str, owner: str) -> None:
    assert memsvc.retrieve(DB_QUESTION, api_key_id=f"{owner}-nobody").memories == ()


# ---- inject ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fmt,provider,body,memory_of",
    [
        ("openai-chat", "openai", chat_body(DB_QUESTION), lambda out: out["messages"][0]["content"]),
        ("openai-responses", "openai", responses_body(DB_QUESTION), lambda out: out["instructions"]),
        ("anthropic", "anthropic", anthropic_body(DB_QUESTION), lambda out: out["system"]),
        ("gemini", "gemini", gemini_body(DB_QUESTION), lambda out: out["systemInstruction"]["parts"][0]["text"]),
    ],
)
def test_inject_in_every_provider_format(
    memsvc: Memsvc, stored: str, fmt: str, provider: str, body: dict[str, Any], memory_of: Callable[..., str]
) -> None:
    before = repr(body)
    result = memsvc.inject(body, provider=provider)
    assert result.injected and result.format == fmt and result.role == "system"
    assert result.memory_ids == (stored,) and result.tokens > 0 and result.skipped_reason == ""
    assert memory_of(result.request).startswith(MEMORY_PREFIX + DB_MEMORY)
    assert VALIDATORS[fmt](result.request) == []  # still a body the provider accepts
    assert repr(body) == before  # the caller's body is not changed


def test_an_injected_body_keeps_its_integers(memsvc: Memsvc, stored: str) -> None:
    """Struct numbers travel as doubles; `max_tokens: 1024` must not come back as 1024.0."""
    result = memsvc.inject(anthropic_body(DB_QUESTION), provider="anthropic")
    assert result.request["max_tokens"] == 1024 and isinstance(result.request["max_tokens"], int)


def test_inject_as_a_user_turn_cache_safe_and_skipped(memsvc: Memsvc, stored: str) -> None:
    body = chat_body(DB_QUESTION)
    as_user = memsvc.inject(body, provider="glm")  # a provider that takes memory as a user turn
    assert as_user.injected and as_user.role == "user"
    cache_safe = memsvc.inject(body, provider="openai", cache_safe=True)
    assert cache_safe.request["messages"][0] == body["messages"][0]  # the cached prefix stays first
    skipped = memsvc.inject(body, provider="openai", no_memory=True)
    assert not skipped.injected and skipped.request == body and skipped.skipped_reason
    nothing = memsvc.inject(chat_body("Write a haiku about the ocean at night"), provider="openai")
    assert not nothing.injected and nothing.memory_ids == () and nothing.skipped_reason


# ---- extract -----------------------------------------------------------------------------------


FACTS_TEXT = "I prefer concise answers. I usually answer in bullet points."


def test_extract_dry_run_reports_facts_and_stores_nothing(memsvc: Memsvc) -> None:
    result = memsvc.extract(user_message=FACTS_TEXT, dry_run=True)
    assert {f.category for f in result.facts} == {"preference", "pattern"}
    assert all(f.content and f.key and f.type for f in result.facts)
    assert result.stored == 0 and memsvc.memories.page().total == 0


def test_extract_with_wait_stores_the_facts(memsvc: Memsvc) -> None:
    result = memsvc.extract(FACTS_TEXT, wait=True, session_id="chat-1")
    assert result.stored == len(result.facts) >= 2 and not result.accepted
    stored = {m.content for m in memsvc.memories.list()}
    assert {f.content for f in result.facts} <= stored


def test_extract_of_a_turn_in_the_background_is_accepted(memsvc: Memsvc) -> None:
    result = memsvc.extract(user_message=FACTS_TEXT, assistant_message="Noted.")
    assert result.accepted and result.facts


# ---- settings ----------------------------------------------------------------------------------


def test_settings_get_and_update_in_either_spelling(connect: Callable[..., Memsvc]) -> None:
    client = connect()
    before = client.settings.get()
    assert isinstance(before, MemorySettings) and before.enabled is False and before.max_tokens == 2000
    assert before.custom_base_url is None and before.fallback_backends == ()
    after = client.settings.update(enabled=True, max_tokens=1500, strategy="recent")
    assert (after.enabled, after.max_tokens, after.strategy) == (True, 1500, "recent")
    again = client.settings.update({"retentionDays": 7})
    assert again.retention_days == 7 and again.max_tokens == 1500
    assert client.settings.get() == again


def test_a_refused_settings_update_lists_every_violation_and_saves_nothing(connect: Callable[..., Memsvc]) -> None:
    client = connect()
    with pytest.raises(InvalidArgument) as info:
        client.settings.update(max_tokens=99999, strategy="bogus", enabled=True)
    assert {v.field for v in info.value.field_violations} == {"maxTokens", "strategy"}
    assert info.value.reason == "INVALID_ARGUMENT" and "strategy" in info.value.message
    assert client.settings.get().enabled is False  # nothing was saved
    with pytest.raises(InvalidArgument) as unknown:
        client.settings.update(no_such_setting=True)
    assert [(v.field, v.description) for v in unknown.value.field_violations] == [("noSuchSetting", "unknown setting")]
    with pytest.raises(ValueError):
        client.settings.update()


# ---- reindex -----------------------------------------------------------------------------------


def test_reindex_streams_monotone_progress_to_done(
    boot: Callable[..., tuple[ServerHandle, Stubs]],
    static_model: Any,  # noqa: F811 - fixture
) -> None:
    handle, _ = boot(static_model=str(static_model))
    with Memsvc(address(handle), api_key_id="sdk-reindex") as client:
        client.settings.update(enabled=True)  # no embedding source yet: nothing is embedded
        total = 600  # three batches of at most 256
        assert (
            client.memories.add_many([f"bulk memory {i} about topic {i % 17}" for i in range(total)]).failed_count == 0
        )
        client.settings.update(embedding_source="static", static_enabled=True)
        warm(handle)

        stream = client.reindex()
        messages = list(stream)
        assert all(isinstance(m, ReindexProgress) for m in messages)
        first, last = messages[0], messages[-1]
        assert first.started and first.pending == total and first.processed == 0 and not first.finished
        assert len(messages) >= 1 + 3 + 1  # first, one per batch, last
        processed = [m.processed for m in messages]
        assert processed == sorted(processed)
        assert [m.pending for m in messages] == sorted((m.pending for m in messages), reverse=True)
        assert all(m.state == "running" for m in messages[:-1])
        assert last.finished and last.state == "done" and last.processed == total and last.pending == 0
        assert last.errors == 0 and last.error == "" and stream.last == last

        # Nothing pending now: a real zero, done at once; `wait()` reads to the end.
        assert client.reindex().wait().state == "done"
        forced = client.reindex(force=True, limit=100).wait()
        assert forced.state == "done" and forced.processed == 100

        semantic = client.retrieve("topic 3 bulk memory", strategy="semantic", limit=3)
        assert semantic.resolution.embedding_source == "static"
        assert semantic.resolution.embedding_model == STATIC_NAME
        assert semantic.memories and all(m.vec_score is not None for m in semantic.memories)


def test_a_reindex_without_an_embedding_source_is_refused_before_any_progress(memsvc: Memsvc) -> None:
    memsvc.memories.add("something to embed")
    stream = memsvc.reindex()
    received = []
    with pytest.raises(FailedPrecondition) as info:
        for message in stream:
            received.append(message)
    assert received == []
    assert info.value.reason == "NO_EMBEDDING_SOURCE" and info.value.message.startswith("no embedding source")
