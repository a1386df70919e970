"""Retrieval through the real gRPC server: hostile query text, ranking,
the strict token budget, expiry/retention/owner filters, access counters, CJK and Russian.

Memories are created with CreateMemory; ages and expiries are moved with direct SQL.
"""

from __future__ import annotations

import math
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb

C = grpc.StatusCode
OWNER = "key-retrieval"
STRATEGIES = ("recent", "semantic", "hybrid")
ODD_QUERIES = [
    "C++ language",
    "Johnson & Johnson",
    "parens(test)",
    "asterisk*wildcard",
    "single'quote",
    '"quoted phrase"',
    '"',
    "AND OR NOT NEAR(",
    "NEAR(a b, 2)",
    "col:umn",
    "^start",
    "-minus +plus",
    "***",
    "''",
    "()",
    "{}[]",
    "a OR",
    '"unbalanced',
    "AND",
    "\\",
    "%_",
    "; DROP TABLE memories; --",
]


# ---- helpers ---------------------------------------------------------------------------------


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def enable(stubs, **values: Any) -> None:
    stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=struct({"enabled": True, **values})))


def create(stubs, content: str, api_key_id: str = OWNER, **fields) -> str:
    return stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id=api_key_id, content=content, **fields)).id


def retrieve(stubs, query: str = "", api_key_id: str = OWNER, **fields) -> epb.RetrieveResponse:
    return stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=api_key_id, query=query, **fields))


def preview(stubs, query: str, **fields) -> epb.RetrievePreviewResponse:
    return stubs.engine.RetrievePreview(epb.RetrievePreviewRequest(query=query, **fields))


def ids(resp) -> list[str]:
    return [m.id for m in resp.memories]


def sql(server, query: str, params: tuple = ()) -> list[tuple]:
    with server.app.database.write() as conn:
        return [tuple(r) for r in conn.execute(query, params).fetchall()]


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def access_counts(server) -> dict[str, int]:
    """The counters once every access recorded so far is written (they are recorded off the
    request path, by the server's background writer)."""
    server.app.engine.access.flush()
    deadline = time.monotonic() + 10
    while server.app.background.pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    return dict(sql(server, "SELECT id, access_count FROM memories"))


# ---- query text never breaks the keyword index ----------------------------------------------


@pytest.fixture
def corpus(server, stubs):
    enable(stubs)
    made = {
        "cpp": create(stubs, "I write C++ language code daily", key="lang:cpp"),
        "jj": create(stubs, "Johnson & Johnson is the client", key="client:jj"),
        "parens": create(stubs, "Call parens(test) before commit", key="cmd:parens"),
        "star": create(stubs, "The asterisk*wildcard pattern matches", key="glob"),
        "quote": create(stubs, "It's a single'quote example", key="quote"),
        "phrase": create(stubs, 'He said "quoted phrase" twice', key="phrase"),
        "near": create(stubs, "Stay NEAR the office AND the park", key="near"),
    }
    return made


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("query", ODD_QUERIES)
def test_odd_query_text_never_raises(stubs, corpus, strategy, query):
    resp = retrieve(stubs, query, strategy=strategy)
    assert len(set(ids(resp))) == len(ids(resp))
    assert resp.total_tokens == sum(m.tokens for m in resp.memories)
    shown = preview(stubs, query, strategy=strategy, api_key_id=OWNER)
    assert len(set(ids(shown))) == len(ids(shown))


@pytest.mark.parametrize("strategy", ["semantic", "hybrid"])
@pytest.mark.parametrize(
    "query,expected",
    [
        ("C++ language", "cpp"),
        ("Johnson & Johnson", "jj"),
        ("parens(test)", "parens"),
        ("asterisk*wildcard", "star"),
        ('"quoted phrase"', "phrase"),
    ],
)
def test_odd_query_text_still_finds_its_memory(stubs, corpus, strategy, query, expected):
    resp = retrieve(stubs, query, strategy=strategy)
    assert ids(resp) and ids(resp)[0] == corpus[expected], [m.content for m in resp.memories]


def test_hybrid_returns_no_duplicates(server, stubs):
    enable(stubs)
    for i in range(30):
        create(stubs, f"deploy notes {i}: kubernetes and helm" if i % 2 else f"misc note {i} kubernetes")
    for query in ("kubernetes", "kubernetes helm deploy", "misc", ""):
        got = ids(retrieve(stubs, query, strategy="hybrid"))
        assert got and len(got) == len(set(got)), query
        shown = ids(preview(stubs, query or "kubernetes", strategy="hybrid", api_key_id=OWNER, limit=100))
        assert len(shown) == len(set(shown))


# ---- ranking ---------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_typescript_query_ranks_the_typescript_memory_first(server, stubs, strategy):
    enable(stubs)
    typescript = create(stubs, "User writes TypeScript for the frontend", key="lang:typescript")
    old = create(stubs, "User likes long walks on the beach", key="hobby")
    sql(server, "UPDATE memories SET created_at = ? WHERE id = ?", (iso(datetime.now(UTC) - timedelta(days=5)), old))
    for language in ("Python", "Rust", "Go", "Java", "Kotlin"):  # all newer than the TypeScript one
        create(stubs, f"User writes {language} for the backend", key=f"lang:{language.lower()}")

    resp = retrieve(stubs, "TypeScript", strategy=strategy)
    assert ids(resp)[0] == typescript, [m.content for m in resp.memories]
    assert resp.memories[0].score > max((m.score for m in resp.memories[1:]), default=0)
    shown = preview(stubs, "TypeScript", strategy=strategy, api_key_id=OWNER)
    assert ids(shown)[0] == typescript


def test_recent_without_query_is_newest_first(server, stubs):
    enable(stubs)
    made = [create(stubs, f"memory number {i}") for i in range(5)]
    assert ids(retrieve(stubs, "", strategy="recent")) == made[::-1]


# ---- the budget ------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_budget_skips_a_memory_too_big_and_keeps_a_smaller_one(server, stubs, strategy):
    enable(stubs)
    create(stubs, "scopefix " * 100)
    small = create(stubs, "scopefix small")  # not a shorter repeat of the big one: merging it would not test the budget
    resp = retrieve(stubs, "scopefix", strategy=strategy, max_tokens=10)
    assert ids(resp) == [small]
    assert resp.total_tokens == tokens("scopefix small") <= 10
    shown = preview(stubs, "scopefix", strategy=strategy, api_key_id=OWNER, max_tokens=10)
    assert ids(shown) == [small] and shown.budget_max_tokens == 10


def test_budget_from_settings(server, stubs):
    enable(stubs, maxTokens=10)
    create(stubs, "scopefix " * 100)
    small = create(stubs, "scopefix small")
    assert ids(retrieve(stubs, "scopefix")) == [small]


@pytest.mark.parametrize("budget", [0, -1, 16001])
def test_budget_out_of_range_is_invalid_argument(server, stubs, budget):
    enable(stubs)
    with pytest.raises(grpc.RpcError) as info:
        retrieve(stubs, "x", max_tokens=budget)
    assert info.value.code() is C.INVALID_ARGUMENT


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    budget=st.integers(1, 600),
    sizes=st.lists(st.integers(10, 2400), min_size=1, max_size=8),
    strategy=st.sampled_from(STRATEGIES),
)
@example(budget=3, sizes=[10, 11], strategy="recent")  # "budgetword" and "budgetword ": one fact twice
def test_budget_property(server, stubs, budget, sizes, strategy):
    """Total ≤ budget; tokens = ceil(chars / 4); and greedy: every memory left out could not
    have fitted even in what remains (so nothing was left out after an oversized one)."""
    enable(stubs)
    owner = f"prop-{uuid.uuid4().hex}"
    contents = {}
    for i, size in enumerate(sizes):
        content = ("budgetword " + "x" * size)[:size]
        # Keyed: each its own memory, although two may say the same ("budgetword" and
        # "budgetword "), which a keyless create would merge.
        contents[create(stubs, content, api_key_id=owner, key=f"budget-{i}")] = content
    resp = retrieve(stubs, "budgetword", api_key_id=owner, strategy=strategy, max_tokens=budget)
    got = ids(resp)
    assert len(got) == len(set(got)) and set(got) <= set(contents)
    assert resp.total_tokens == sum(m.tokens for m in resp.memories) <= budget
    for m in resp.memories:
        assert m.tokens == tokens(contents[m.id]) and m.content == contents[m.id]
    left = budget - resp.total_tokens
    for memory_id, content in contents.items():
        if memory_id not in got:
            assert tokens(content) > left, (budget, sizes, got)


# ---- filters ---------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_expired_memories_never_come_back(server, stubs, strategy):
    enable(stubs)
    soon = datetime.now(UTC) + timedelta(seconds=60)  # CreateMemory refuses a past expiry
    ts = mpb.CreateMemoryRequest().expires_at
    ts.FromDatetime(soon)
    expired = create(stubs, "expiring fact about llamas", expires_at=ts)
    kept = create(stubs, "lasting fact about llamas")
    assert set(ids(retrieve(stubs, "llamas", strategy=strategy))) == {expired, kept}, "visible before expiry"
    sql(server, "UPDATE memories SET expires_at = '2001-01-01T00:00:00.000000Z' WHERE id = ?", (expired,))

    for query in ("llamas", "expiring fact", ""):
        assert expired not in ids(retrieve(stubs, query, strategy=strategy)), query
        if query:
            assert expired not in ids(preview(stubs, query, strategy=strategy, api_key_id=OWNER))
            assert expired not in ids(preview(stubs, query, strategy=strategy))
    assert ids(retrieve(stubs, "llamas", strategy=strategy)) == [kept]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_out_of_retention_memories_never_come_back(server, stubs, strategy):
    enable(stubs, retentionDays=30)
    old = create(stubs, "ancient fact about otters")
    kept = create(stubs, "fresh fact about otters")
    sql(server, "UPDATE memories SET created_at = ? WHERE id = ?", (iso(datetime.now(UTC) - timedelta(days=40)), old))

    for query in ("otters", "ancient fact", ""):
        assert old not in ids(retrieve(stubs, query, strategy=strategy)), query
        if query:
            assert old not in ids(preview(stubs, query, strategy=strategy, api_key_id=OWNER))
            assert old not in ids(preview(stubs, query, strategy=strategy))
    assert ids(retrieve(stubs, "otters", strategy=strategy)) == [kept]

    enable(stubs, retentionDays=60)  # control: it is the retention window that hid it
    assert old in ids(retrieve(stubs, "otters", strategy=strategy))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_api_keys_are_isolated(server, stubs, strategy):
    enable(stubs)
    a = {create(stubs, f"tenant secret {i} about zebras", api_key_id="key-a") for i in range(3)}
    b = {create(stubs, f"tenant secret {i} about zebras", api_key_id="key-b") for i in range(3)}
    for query in ("zebras", "tenant secret", ""):
        assert set(ids(retrieve(stubs, query, api_key_id="key-a", strategy=strategy))) == a
        assert set(ids(retrieve(stubs, query, api_key_id="key-b", strategy=strategy))) == b
        assert ids(retrieve(stubs, query, api_key_id="key-c", strategy=strategy)) == []
    assert set(ids(preview(stubs, "zebras", api_key_id="key-a", strategy=strategy))) == a


def test_retrieve_without_api_key_is_invalid_argument(server, stubs):
    enable(stubs)
    with pytest.raises(grpc.RpcError) as info:
        retrieve(stubs, "x", api_key_id="")
    assert info.value.code() is C.INVALID_ARGUMENT


def test_retrieve_touches_access_count_and_preview_does_not(server, stubs):
    enable(stubs)
    hit = create(stubs, "gardening tips for tomatoes")
    miss = create(stubs, "astronomy notes about comets")
    assert access_counts(server) == {hit: 0, miss: 0}

    for _ in range(3):
        shown = preview(stubs, "tomatoes", api_key_id=OWNER)
        assert ids(shown) == [hit]
    assert access_counts(server) == {hit: 0, miss: 0}

    assert ids(retrieve(stubs, "tomatoes")) == [hit]
    assert access_counts(server) == {hit: 1, miss: 0}
    assert ids(retrieve(stubs, "tomatoes")) == [hit]
    assert access_counts(server) == {hit: 2, miss: 0}
    last = dict(sql(server, "SELECT id, last_accessed_at FROM memories"))
    assert last[hit] is not None and last[miss] is None
    # Bumping counters did not rewrite the keyword index: it still finds the row.
    assert ids(retrieve(stubs, "tomatoes", strategy="semantic")) == [hit]


def test_retrieve_with_memory_disabled_returns_nothing(server, stubs):
    created = create(stubs, "disabled retrieval fact about owls")
    for strategy in STRATEGIES:
        resp = retrieve(stubs, "owls", strategy=strategy)
        assert list(resp.memories) == [] and resp.total_tokens == 0
        assert "disabled" in resp.resolution.fallback_reason
    assert access_counts(server) == {created: 0}
    enable(stubs)  # control
    assert ids(retrieve(stubs, "owls")) == [created]


# ---- languages -------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["semantic", "hybrid"])
@pytest.mark.parametrize(
    "fact,query,other",
    [
        ("我喜欢深色模式", "深色模式是什么", "我喜欢喝绿茶"),
        ("私はダークモードが好きです", "ダークモードについて教えて", "私は猫を飼っています"),
        ("Я предпочитаю тёмную тему в редакторе", "Какую тёмную тему я люблю?", "Я живу в Москве"),
    ],
)
def test_cjk_and_russian_facts_are_found_by_their_language(server, stubs, strategy, fact, query, other):
    enable(stubs)
    wanted = create(stubs, fact)
    create(stubs, other)
    create(stubs, "The user prefers light mode in English text")
    resp = retrieve(stubs, query, strategy=strategy)
    assert ids(resp) == [wanted], [m.content for m in resp.memories]
    assert resp.memories[0].tier == "keyword"
    shown = preview(stubs, query, strategy=strategy, api_key_id=OWNER)
    assert ids(shown) == [wanted]


def test_extracted_chinese_fact_is_retrieved(server, stubs):
    enable(stubs)
    out = stubs.engine.Extract(epb.ExtractRequest(user_message="我喜欢深色模式。", api_key_id=OWNER, wait=True))
    assert out.stored == 1
    resp = retrieve(stubs, "深色模式是什么")
    assert [m.content for m in resp.memories] == [out.facts[0].content]


# ---- scoring and preview defaults ------------------------------------------------------------


def test_keyword_relevance_example_scores_38(server, stubs):
    """The keyword relevance rule: "User prefers dark mode" / "preference:dark_mode" / "dark mode" → 38
    (the recent strategy scores by relevance alone)."""
    enable(stubs)
    wanted = create(stubs, "User prefers dark mode", key="preference:dark_mode")
    create(stubs, "User prefers light roast coffee", key="preference:coffee")
    resp = retrieve(stubs, "dark mode", strategy="recent")
    assert ids(resp) == [wanted]
    assert resp.memories[0].score == 38


def test_preview_defaults_limit_20_and_budget_2000(server, stubs):
    for i in range(25):
        create(stubs, f"defaultsword item {i}")
    shown = preview(stubs, "defaultsword", api_key_id=OWNER)
    assert len(shown.memories) == 20 and shown.budget_max_tokens == 2000
    assert shown.total_tokens_used == sum(m.tokens for m in shown.memories)
    assert len(preview(stubs, "defaultsword", api_key_id=OWNER, limit=100).memories) == 25


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_session_scope_filters_retrieve_and_preview(server, stubs, strategy):
    enable(stubs, scope="session")
    s1 = create(stubs, "session one note about herons", session_id="s1")
    s2 = create(stubs, "session two note about herons", session_id="s2")
    for query in ("herons", "session note", ""):
        assert ids(retrieve(stubs, query, session_id="s1", strategy=strategy)) == [s1], query
        assert ids(retrieve(stubs, query, session_id="s2", strategy=strategy)) == [s2], query
        if query:
            assert ids(preview(stubs, query, api_key_id=OWNER, session_id="s1", strategy=strategy)) == [s1]
    enable(stubs, scope="apiKey")  # control: the key sees both sessions
    assert set(ids(retrieve(stubs, "herons", session_id="s1", strategy=strategy))) == {s1, s2}
