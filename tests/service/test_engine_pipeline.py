"""The engine's chat pipeline through the real gRPC server: Extract stores facts, Inject puts
them back into the next chat request, Summarize folds old ones.

Every test runs against a fresh in-process server (the `server` fixture) with memory turned
on through UpdateMemorySettings where it needs it (memory is OFF by default).
"""

from __future__ import annotations

import logging
import math
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb
from tests.support.rpc_errors import violated_fields

C = grpc.StatusCode
OWNER = "key-pipeline"
FACTS_TEXT = "I prefer concise answers. I usually answer in bullet points."
QUESTION = "How should you format answers? concise?"
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": QUESTION}]}
MEMORY_CONTEXT = re.compile(r"Memory context: .*concise answers", re.DOTALL)
BACKGROUND_LOGGER = "memsvc.core.background"
EXTRACTION_FAILED = "memory.extraction.background.failed"


# ---- helpers ---------------------------------------------------------------------------------


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def as_dict(s: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(s)


def update_settings(stubs, **values: Any) -> spb.MemorySettings:
    return stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=struct(values)))


def enable(stubs, **values: Any) -> spb.MemorySettings:
    return update_settings(stubs, enabled=True, **values)


def extract(stubs, text: str = FACTS_TEXT, api_key_id: str = OWNER, metadata=None, **fields) -> epb.ExtractResponse:
    fields.setdefault("wait", True)
    return stubs.engine.Extract(
        epb.ExtractRequest(user_message=text, api_key_id=api_key_id, **fields), metadata=metadata
    )


def inject(
    stubs, body: dict[str, Any] = CHAT, api_key_id: str = OWNER, provider: str = "openai", metadata=None, **fields
) -> epb.InjectResponse:
    return stubs.engine.Inject(
        epb.InjectRequest(request=struct(body), provider=provider, api_key_id=api_key_id, **fields), metadata=metadata
    )


def listing(stubs, api_key_id: str = OWNER) -> mpb.ListMemoriesResponse:
    return stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=api_key_id, limit=200))


def create(stubs, content: str, api_key_id: str = OWNER, **fields) -> str:
    return stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id=api_key_id, content=content, **fields)).id


def row_count(server) -> int:
    with server.app.database.read() as conn:
        return conn.execute("SELECT count(*) FROM memories").fetchone()[0]


def sql(server, query: str, params: tuple = ()) -> None:
    with server.app.database.write() as conn:
        conn.execute(query, params)


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def assert_unchanged(resp: epb.InjectResponse, body: dict[str, Any]) -> None:
    assert resp.injected is False, resp
    assert as_dict(resp.request) == as_dict(struct(body))
    assert resp.role == "" and list(resp.memory_ids) == [] and resp.tokens == 0
    assert resp.skipped_reason, "a skipped injection says why"


def rpc_error(call, *args, **kwargs) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call(*args, **kwargs)
    return info.value


def wait_until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def enabled(server, stubs):
    """Memory on, and the two facts of FACTS_TEXT stored for OWNER."""
    enable(stubs)
    assert extract(stubs).stored == 2
    return stubs


# ---- extract → inject ------------------------------------------------------------------------


def test_extract_stores_facts_and_next_inject_uses_them(server, stubs):
    enable(stubs)
    extracted = extract(stubs)
    assert extracted.stored == 2 and extracted.accepted is False and extracted.skipped_reason == ""
    # Each fact is stored as a statement that stands alone: subject, verb and object.
    assert {(f.key, f.content, f.type) for f in extracted.facts} == {
        ("preference:concise_answers", "User prefers concise answers", "factual"),
        ("pattern:answer_in_bullet_points", "User usually answers in bullet points", "factual"),
    }
    listed = listing(stubs)
    assert listed.total == 2
    assert {m.content for m in listed.data} == {"User prefers concise answers", "User usually answers in bullet points"}
    for m in listed.data:
        assert m.api_key_id == OWNER and m.type == "factual"
        assert dict(m.metadata)["source"] == "llm_response"

    resp = inject(stubs)
    assert resp.injected is True and resp.role == "system"
    messages = as_dict(resp.request)["messages"]
    assert len(messages) == 2
    assert messages[0]["role"] == "system"
    assert MEMORY_CONTEXT.match(messages[0]["content"]), messages[0]
    assert messages[1] == CHAT["messages"][0]
    assert as_dict(resp.request)["model"] == "gpt-4o"
    assert set(resp.memory_ids) <= {m.id for m in listed.data} and resp.memory_ids
    assert resp.tokens == sum(tokens(m.content) for m in listed.data if m.id in set(resp.memory_ids))

    # Extracting the same text again updates in place: the table does not grow.
    assert extract(stubs).stored == 2
    assert listing(stubs).total == 2


def test_a_contradiction_replaces_the_old_fact_instead_of_adding_one(server, stubs):
    enable(stubs)
    assert extract(stubs, "I like tea.").stored == 1
    [before] = listing(stubs).data
    assert (before.key, before.content, dict(before.metadata)["polarity"]) == (
        "preference:tea",
        "User likes tea",
        "positive",
    )
    assert extract(stubs, "I don't like tea anymore.").stored == 1
    [after] = listing(stubs).data
    assert after.id == before.id and after.key == "preference:tea"
    assert after.content == "User does not like tea anymore" and dict(after.metadata)["polarity"] == "negative"
    # The same in Russian: one fact about tea, now negative.
    extract(stubs, "Я люблю чай.", api_key_id="key-ru")
    extract(stubs, "Я больше не люблю чай.", api_key_id="key-ru")
    [ru] = listing(stubs, "key-ru").data
    assert (ru.key, ru.content) == ("preference:чай", "Пользователь больше не любит чай")


EVERYDAY_TEXT = (
    "Hi, my name is Anna. I live in Lyon. I'm vegetarian and I'm allergic to peanuts. "
    "I have two kids and a cat named Miso. I'm a nurse. Always reply in French. "
    "I don't like long answers. My wife is a doctor. My wife prefers tea. "
    "If I liked coffee, I would say so. Do I like jazz?"
)


def test_extract_stores_self_contained_everyday_facts_and_nothing_else(server, stubs):
    enable(stubs)
    out = extract(stubs, EVERYDAY_TEXT)
    stored = {m.key: m.content for m in listing(stubs).data}
    assert out.stored == len(stored) == 10
    assert stored == {
        "name:user": "User's name is Anna",
        "location:home": "User lives in Lyon",
        "diet:vegetarian": "User is vegetarian",
        "diet:allergy_peanuts": "User is allergic to peanuts",
        "family:children": "User has two kids",
        "pet:miso": "User has a cat named Miso",
        "profession:job": "User is a nurse",
        "language:reply": "User wants replies in French",
        "preference:long_answers": "User does not like long answers",
        "family:wife_profession": "User's wife is a doctor",
    }
    # The memory that reaches the model keeps the negation.
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "long answers"}]}
    messages = as_dict(inject(stubs, body).request)["messages"]
    assert "User does not like long answers" in messages[0]["content"]


@pytest.mark.parametrize(
    "text",
    [
        "Do I like jazz? If I liked coffee, I would say so. My wife prefers tea. My husband says I love sushi.",
        "猫が好きですか？もし東京に住んでいたら楽しい。彼はVimが好きだと言っています。",
        "我喜欢茶吗？如果我喜欢猫，我就会养一只。他说我喜欢吃辣。",
        "Я люблю джаз? Если бы я любил кошек, я бы завёл кошку. Жена думает, что я люблю сладкое.",
    ],
    ids=["en", "ja", "zh", "ru"],
)
def test_questions_hypotheticals_and_reported_speech_store_nothing(server, stubs, text):
    enable(stubs)
    out = extract(stubs, text)
    assert (out.stored, list(out.facts), out.skipped_reason) == (0, [], "no facts found")
    assert listing(stubs).total == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "私の名前は田中です。東京に住んでいます。子供が二人います。日本語で返事してください。もし猫が好きなら教えて。",
            {
                "name:user": "ユーザーの名前は田中",
                "location:home": "ユーザーは東京に住んでいる",
                "family:children": "ユーザーには子供が二人いる",
                "language:reply": "ユーザーは日本語での返答を希望している",
            },
        ),
        (
            "我叫李明。我住在北京。我是素食者。请用中文回答。他说我喜欢茶。",
            {
                "name:user": "用户的名字是李明",
                "location:home": "用户住在北京",
                "diet:vegetarian": "用户是素食者",
                "language:reply": "用户希望用中文回复",
            },
        ),
        (
            "Меня зовут Анна. Я живу в Москве. Я работаю врачом. Отвечай на русском. Я люблю чай?",
            {
                "name:user": "Пользователя зовут Анна",
                "location:home": "Пользователь живёт в Москве",
                "profession:job": "Пользователь работает врачом",
                "language:reply": "Пользователь просит отвечать на русском",
            },
        ),
    ],
    ids=["ja", "zh", "ru"],
)
def test_extract_stores_everyday_facts_in_every_language(server, stubs, text, expected):
    enable(stubs)
    assert extract(stubs, text).stored == len(expected)
    assert {m.key: m.content for m in listing(stubs).data} == expected


def test_inject_fits_the_max_tokens_setting(server, stubs):
    enable(stubs)
    big = "concise answers " * 7  # 112 characters → 28 tokens: never fits 20
    small = "concise answers"  # 4 tokens
    big_id, small_id = create(stubs, big, key="big"), create(stubs, small, key="small")

    both = inject(stubs)  # default budget 2000: both fit
    assert set(both.memory_ids) == {big_id, small_id}

    enable(stubs, maxTokens=20)
    resp = inject(stubs)
    assert resp.injected is True
    assert 0 < resp.tokens <= 20
    assert list(resp.memory_ids) == [small_id], "the big one is skipped, the smaller one after it still fits"
    content = as_dict(resp.request)["messages"][0]["content"]
    assert content == "Memory context: concise answers"
    assert tokens(content[len("Memory context: ") :]) <= 20


def test_max_tokens_zero_injects_nothing(enabled, server):
    stubs = enabled
    enable(stubs, maxTokens=0)
    assert_unchanged(inject(stubs), CHAT)


def test_disabled_memory_neither_extracts_nor_injects(server, stubs):
    # Off by default: nothing is stored.
    off = extract(stubs)
    assert off.stored == 0 and off.accepted is False and "disabled" in off.skipped_reason
    assert len(off.facts) == 2, "facts are still reported"
    assert row_count(server) == 0

    enable(stubs)
    assert extract(stubs).stored == 2
    assert inject(stubs).injected is True

    update_settings(stubs, enabled=False)
    resp = extract(stubs, "I prefer green tea.")
    assert resp.stored == 0 and "disabled" in resp.skipped_reason
    resp = extract(stubs, "I prefer green tea.", wait=False)
    assert resp.accepted is False and "disabled" in resp.skipped_reason
    assert listing(stubs).total == 2
    assert not any("green tea" in m.content for m in listing(stubs).data)

    injected = inject(stubs)
    assert_unchanged(injected, CHAT)
    assert "disabled" in injected.skipped_reason


OPT_OUTS = [
    pytest.param({"no_memory": True}, None, id="noMemory-field"),
    pytest.param({}, [("x-omniroute-no-memory", "TRUE")], id="x-omniroute-no-memory-TRUE"),
    pytest.param({}, [("x-memsvc-no-memory", "1")], id="x-memsvc-no-memory-1"),
    pytest.param({}, [("x-omniroute-no-memory", "yes")], id="x-omniroute-no-memory-yes"),
    pytest.param({}, [("x-memsvc-no-memory", " True ")], id="x-memsvc-no-memory-padded"),
]


@pytest.mark.parametrize("fields,metadata", OPT_OUTS)
def test_per_request_opt_out(enabled, server, fields, metadata):
    stubs = enabled
    resp = inject(stubs, metadata=metadata, **fields)
    assert_unchanged(resp, CHAT)
    assert "no-memory" in resp.skipped_reason

    before = row_count(server)
    out = extract(stubs, "I prefer green tea.", metadata=metadata, **fields)
    assert out.stored == 0 and out.accepted is False and out.skipped_reason
    out = extract(stubs, "I prefer green tea.", metadata=metadata, wait=False, **fields)
    assert out.accepted is False
    assert row_count(server) == before


@pytest.mark.parametrize("value", ["false", "0", "no", ""])
def test_opt_out_header_with_other_values_keeps_memory_on(enabled, value):
    resp = inject(enabled, metadata=[("x-omniroute-no-memory", value), ("x-memsvc-no-memory", value)])
    assert resp.injected is True


def test_session_scope_keeps_sessions_apart(server, stubs):
    enable(stubs, scope="session")
    assert extract(stubs, "I like tea", session_id="s1").stored == 1
    assert extract(stubs, "I like coffee", session_id="s2").stored == 1
    body = {"messages": [{"role": "user", "content": "Do I like tea or coffee?"}]}

    s1 = as_dict(inject(stubs, body, session_id="s1").request)["messages"][0]["content"]
    s2 = as_dict(inject(stubs, body, session_id="s2").request)["messages"][0]["content"]
    assert "tea" in s1 and "coffee" not in s1
    assert "coffee" in s2 and "tea" not in s2
    assert_unchanged(inject(stubs, body, session_id="s3"), body)

    # Control: with scope apiKey the same key sees both sessions' facts.
    enable(stubs, scope="apiKey")
    both = as_dict(inject(stubs, body, session_id="s1").request)["messages"][0]["content"]
    assert "tea" in both and "coffee" in both


def test_no_api_key_id_no_memory(enabled, server):
    stubs = enabled
    resp = inject(stubs, api_key_id="")
    assert_unchanged(resp, CHAT)
    assert "apiKeyId" in resp.skipped_reason

    before = row_count(server)
    out = extract(stubs, "I prefer green tea.", api_key_id="")
    assert out.stored == 0 and out.skipped_reason
    out = extract(stubs, "I prefer green tea.", api_key_id="", wait=False)
    assert out.accepted is False
    assert row_count(server) == before


def test_extract_dry_run_returns_facts_and_stores_nothing(server, stubs):
    enable(stubs)
    resp = extract(stubs, dry_run=True)
    assert {f.key for f in resp.facts} == {"preference:concise_answers", "pattern:answer_in_bullet_points"}
    assert resp.stored == 0 and resp.accepted is False
    resp = extract(stubs, dry_run=True, wait=False)
    assert len(resp.facts) == 2 and resp.accepted is False
    assert row_count(server) == 0


def test_extract_without_wait_acknowledges_then_stores(server, stubs):
    enable(stubs)
    resp = extract(stubs, wait=False)
    assert resp.accepted is True and resp.stored == 0 and len(resp.facts) == 2
    wait_until(lambda: listing(stubs).total == 2, what="background extraction to store 2 memories")
    assert {m.content for m in listing(stubs).data} == {
        "User prefers concise answers",
        "User usually answers in bullet points",
    }


def test_background_extraction_failure_is_logged_never_returned(server, stubs, caplog):
    enable(stubs)
    caplog.set_level(logging.ERROR, logger=BACKGROUND_LOGGER)
    sql(server, "CREATE TRIGGER refuse BEFORE INSERT ON memories BEGIN SELECT RAISE(ABORT, 'no'); END")
    failures = server.app.background.failures

    resp = extract(stubs, wait=False)
    assert resp.accepted is True and resp.skipped_reason == ""
    wait_until(lambda: server.app.background.failures > failures, what="the background failure")
    wait_until(lambda: any(r.getMessage() == EXTRACTION_FAILED for r in caplog.records), what="the log record")
    record = next(r for r in caplog.records if r.getMessage() == EXTRACTION_FAILED)
    assert record.levelno == logging.ERROR and record.name == BACKGROUND_LOGGER
    assert "concise" not in record.getMessage()
    assert row_count(server) == 0

    # Once storing works again, so does background extraction.
    sql(server, "DROP TRIGGER refuse")
    assert extract(stubs, wait=False).accepted is True
    wait_until(lambda: listing(stubs).total == 2, what="extraction after the failure")


# ---- injection placement through the RPC ----------------------------------------------------

# OpenAI chat bodies; the other formats (Anthropic, Gemini, Responses) are in test_inject_formats.py.
ROLE_MATRIX = [
    ("o1", "", "user"),
    ("O1-MINI", "", "user"),
    ("o1-preview", "", "user"),
    ("glm", "", "user"),
    ("zai", "", "user"),
    ("qianfan", "", "user"),
    ("openrouter", "glm-4.7", "user"),
    ("baidu", "ernie-4", "user"),
    ("openai", "", "system"),
    ("deepseek", "", "system"),
    ("unknown-provider", "", "system"),
]


@pytest.mark.parametrize("provider,model,role", ROLE_MATRIX, ids=[f"{p}/{m}" for p, m, _ in ROLE_MATRIX])
def test_role_by_provider_and_model(enabled, provider, model, role):
    resp = inject(enabled, provider=provider, model=model)
    assert resp.injected is True and resp.role == role
    messages = as_dict(resp.request)["messages"]
    assert len(messages) == 2
    assert messages[0]["role"] == role
    assert MEMORY_CONTEXT.match(messages[0]["content"])
    assert messages[1] == CHAT["messages"][0]


@pytest.mark.parametrize("model", ["glm-4.7", "ernie-4"])
def test_role_from_the_bodys_model_when_no_model_is_given(enabled, model):
    resp = inject(enabled, {**CHAT, "model": model}, provider="openrouter")
    assert resp.role == "user"
    assert as_dict(resp.request)["messages"][0]["role"] == "user"


@pytest.mark.parametrize("provider,role", [("openai", "system"), ("o1", "user")])
def test_memory_message_comes_before_the_users_system_prompt(enabled, provider, role):
    system = {"role": "system", "content": "You are a helpful assistant."}
    body = {"model": "gpt-4o", "messages": [system, CHAT["messages"][0]]}
    messages = as_dict(inject(enabled, body, provider=provider).request)["messages"]
    assert len(messages) == 3
    assert messages[0]["role"] == role and MEMORY_CONTEXT.match(messages[0]["content"])
    assert messages[1:] == body["messages"]


def test_owner_without_memories_gets_the_identical_body(enabled):
    body = {"model": "gpt-4o", "temperature": 0.5, "messages": [{"role": "user", "content": "concise answers?"}]}
    resp = inject(enabled, body, api_key_id="key-with-nothing")
    assert_unchanged(resp, body)


MULTI_TURN = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": QUESTION},
    ],
}


def test_cache_safe_places_memory_before_the_last_user_message(enabled):
    resp = inject(enabled, MULTI_TURN, options=epb.InjectOptions(cache_safe=True))
    messages = as_dict(resp.request)["messages"]
    assert len(messages) == 5
    assert messages[:3] == MULTI_TURN["messages"][:3], "the prompt-cache prefix is unchanged"
    assert messages[3]["role"] == "system" and MEMORY_CONTEXT.match(messages[3]["content"])
    assert messages[4] == MULTI_TURN["messages"][3]

    default = as_dict(inject(enabled, MULTI_TURN).request)["messages"]
    assert MEMORY_CONTEXT.match(default[0]["content"]), "without the option the memory goes first"


def test_system_message_must_be_first_merges_into_the_system_prompt(server, stubs):
    enable(stubs)
    create(stubs, "concise answers", key="pref")
    resp = inject(stubs, MULTI_TURN, options=epb.InjectOptions(system_message_must_be_first=True))
    messages = as_dict(resp.request)["messages"]
    assert len(messages) == 4
    assert messages[0] == {"role": "system", "content": "Memory context: concise answers\n\nYou are terse."}
    assert messages[1:] == MULTI_TURN["messages"][1:]


def test_every_other_field_of_the_body_survives(enabled):
    body = {
        "model": "gpt-4o",
        "temperature": 0.2,
        "top_p": 1,
        "max_tokens": 256,
        "stream": True,
        "stop": None,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
                },
            }
        ],
        "tool_choice": "auto",
        "x_vendor_extension": {"nested": [1, "two", False, None, {"deep": "yes"}]},
        "messages": [
            {"role": "system", "content": "Be brief.", "name": "sys"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": QUESTION},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                ],
            },
        ],
    }
    for options in (epb.InjectOptions(), epb.InjectOptions(cache_safe=True)):
        resp = inject(enabled, body, options=options)
        assert resp.injected is True
        out, sent = as_dict(resp.request), as_dict(struct(body))
        assert {k: v for k, v in out.items() if k != "messages"} == {k: v for k, v in sent.items() if k != "messages"}
        assert [m for m in out["messages"] if not str(m.get("content", "")).startswith("Memory context: ")] == sent[
            "messages"
        ]
        assert len(out["messages"]) == 3


@pytest.mark.parametrize(
    "body",
    [{"prompt": "concise answers?"}, {"messages": "concise answers?"}, {"messages": None}],
    ids=["no-messages", "messages-string", "messages-null"],
)
def test_nothing_injected_reports_no_memories_and_a_reason(enabled, body):
    resp = inject(enabled, body)
    assert resp.injected is False
    assert as_dict(resp.request) == as_dict(struct(body))
    assert list(resp.memory_ids) == [] and resp.tokens == 0
    assert resp.skipped_reason


# ---- summarization ---------------------------------------------------------------------------


def make_old(server, api_key_id: str, days: int = 60) -> None:
    sql(
        server,
        "UPDATE memories SET created_at = ? WHERE api_key_id = ?",
        (iso(datetime.now(UTC) - timedelta(days=days)), api_key_id),
    )


def four_sentences(i: int) -> str:
    return f"Alpha{i}. Beta{i}. Gamma{i}. Delta{i}."


def summarize(stubs, **fields) -> epb.SummarizeResponse:
    return stubs.engine.Summarize(epb.SummarizeRequest(**fields))


def test_summarize_dry_run_lists_candidates_and_deletes_nothing(server, stubs):
    ids = [create(stubs, four_sentences(i), key=f"fact_{i}") for i in range(5)]
    make_old(server, OWNER)
    recent = create(stubs, "A fresh memory.")

    resp = summarize(stubs, api_key_id=OWNER, dry_run=True)
    assert resp.dry_run is True and resp.deleted_count == 0
    assert not resp.HasField("summary_id") and list(resp.summary_ids) == []
    assert sorted(c.id for c in resp.candidates) == sorted(ids)
    assert recent not in {c.id for c in resp.candidates}
    assert resp.total_tokens == sum(tokens(four_sentences(i)) for i in range(5))
    assert listing(stubs).total == 6


def test_summarize_replaces_old_memories_with_one_summary(server, stubs):
    for i in range(5):
        create(stubs, four_sentences(i), key=f"fact_{i}", type="factual")
    make_old(server, OWNER)
    recent = create(stubs, "A fresh memory.")

    resp = summarize(stubs, api_key_id=OWNER, older_than_days=30)
    assert resp.dry_run is False and resp.deleted_count == 5 and len(resp.candidates) == 5
    assert resp.HasField("summary_id") and list(resp.summary_ids) == [resp.summary_id]

    remaining = {m.id: m for m in listing(stubs).data}
    assert set(remaining) == {recent, resp.summary_id}
    summary = remaining[resp.summary_id]
    assert summary.type == "semantic" and summary.key.startswith("summary_")
    assert dict(summary.metadata)["summarizedCount"] == 5
    assert dict(summary.metadata)["olderThanDays"] == 30
    lines = summary.content.split("\n")
    assert len(lines) == 6, summary.content  # a header plus one line per candidate
    assert "Delta" not in summary.content
    for i in range(5):
        assert f"[factual] fact_{i}: Alpha{i}. Beta{i}. Gamma{i}." in lines


@pytest.mark.parametrize("days", [0, 366, -1])
def test_summarize_rejects_days_out_of_range(server, stubs, days):
    create(stubs, "something")
    make_old(server, OWNER, days=400)
    err = rpc_error(summarize, stubs, api_key_id=OWNER, older_than_days=days)
    assert err.code() is C.INVALID_ARGUMENT
    assert "olderThanDays" in violated_fields(err)
    assert row_count(server) == 1


def test_summarize_needs_an_owner_or_all_tenants(server, stubs):
    create(stubs, "something")
    make_old(server, OWNER)
    err = rpc_error(summarize, stubs, older_than_days=30)
    assert err.code() is C.INVALID_ARGUMENT and "apiKeyId" in violated_fields(err)
    err = rpc_error(summarize, stubs, older_than_days=30, dry_run=True)
    assert err.code() is C.INVALID_ARGUMENT
    assert row_count(server) == 1


def test_summarize_all_tenants_gives_each_owner_its_own_summary(server, stubs):
    for owner in ("tenant-a", "tenant-b"):
        for i in range(2):
            create(stubs, f"{owner} note {i}. Second. Third. Fourth.", api_key_id=owner, key=f"{owner}_{i}")
        make_old(server, owner)

    resp = summarize(stubs, all_tenants=True)
    assert resp.deleted_count == 4 and len(resp.summary_ids) == 2
    for owner, other in (("tenant-a", "tenant-b"), ("tenant-b", "tenant-a")):
        rows = listing(stubs, owner).data
        assert len(rows) == 1 and rows[0].id in resp.summary_ids and rows[0].key.startswith("summary_")
        assert f"{owner} note 0." in rows[0].content and f"{owner} note 1." in rows[0].content
        assert other not in rows[0].content


def test_summarize_never_folds_a_kept_memory(server, stubs):
    kept = create(stubs, "The user's name is Ada. She lives in Porto.", key="profile:name", keep=True)
    plain = create(stubs, four_sentences(0), key="fact_0")
    make_old(server, OWNER)

    preview = summarize(stubs, api_key_id=OWNER, dry_run=True)
    assert [c.id for c in preview.candidates] == [plain]
    assert preview.total_tokens == tokens(four_sentences(0))

    resp = summarize(stubs, api_key_id=OWNER, older_than_days=30)
    assert resp.deleted_count == 1 and [c.id for c in resp.candidates] == [plain]
    remaining = {m.id: m for m in listing(stubs).data}
    assert set(remaining) == {kept, resp.summary_id}
    assert remaining[kept].content == "The user's name is Ada. She lives in Porto." and remaining[kept].keep
    assert "Ada" not in remaining[resp.summary_id].content
    assert "Alpha0." in remaining[resp.summary_id].content


def test_summarize_to_budget_rewrites_older_memories_in_place(server, stubs):
    text = "Sentence one is here. Sentence two is here. Sentence three is here. Sentence four is here."
    short = "Sentence one is here. Sentence two is here. Sentence three is here."
    ids = [create(stubs, f"{text}", key=f"k{i}") for i in range(3)]
    now = datetime.now(UTC)
    for age, memory_id in zip((3, 2, 1), ids):  # ids[2] is the newest
        sql(server, "UPDATE memories SET created_at = ? WHERE id = ?", (iso(now - timedelta(hours=age)), memory_id))

    resp = summarize(stubs, api_key_id=OWNER, budget_tokens=tokens(text) + 5)
    assert resp.original_count == 3 and resp.summarized_count == 2
    assert resp.tokens_saved == 2 * (tokens(text) - tokens(short))
    with server.app.database.read() as conn:
        contents = dict(conn.execute("SELECT id, content FROM memories").fetchall())
    assert contents == {ids[0]: short, ids[1]: short, ids[2]: text}


def test_summarize_to_budget_needs_an_owner_and_a_valid_budget(server, stubs):
    create(stubs, "One. Two. Three. Four.")
    err = rpc_error(summarize, stubs, budget_tokens=100)
    assert err.code() is C.INVALID_ARGUMENT and "apiKeyId" in violated_fields(err)
    for budget in (0, -5, 16001):
        assert rpc_error(summarize, stubs, api_key_id=OWNER, budget_tokens=budget).code() is C.INVALID_ARGUMENT
    with server.app.database.read() as conn:
        assert conn.execute("SELECT content FROM memories").fetchall() == [("One. Two. Three. Four.",)]


def test_summarize_budget_violation_names_budget_tokens(server, stubs):
    err = rpc_error(summarize, stubs, api_key_id=OWNER, budget_tokens=0)
    assert violated_fields(err) == {"budgetTokens"}


# ---- robustness: no request shape makes Inject or Extract fail -------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=20,
)
ROLES = st.sampled_from(["user", "system", "assistant", "tool", "developer", "", "USER"])
CONTENT = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["concise answers?", "How should you format answers? concise?", "bullet points"]),
    st.lists(
        st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=50)}), JSON), max_size=3
    ),
    JSON,
)
MESSAGE = st.one_of(st.fixed_dictionaries({"role": ROLES, "content": CONTENT}), JSON)
BODIES = st.one_of(
    st.dictionaries(st.text(max_size=10), JSON, max_size=5),
    st.fixed_dictionaries(
        {"messages": st.one_of(st.lists(MESSAGE, max_size=5), JSON)},
        optional={"model": st.one_of(st.text(max_size=20), JSON), "temperature": JSON, "tools": JSON, "stream": JSON},
    ),
)
PROVIDERS = st.one_of(st.sampled_from(["openai", "o1", "glm", "zai", "anthropic", ""]), st.text(max_size=30))
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)
CUES = st.sampled_from(["I prefer ", "I like ", "I'll use ", "I usually ", "我喜欢", "Я предпочитаю ", "", "私は"])
IDS = st.one_of(
    st.just(OWNER), st.just(""), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)
)
EXTRACT_TEXTS = st.one_of(
    TEXT, st.builds(lambda cue, t, end: cue + t + end, CUES, TEXT, st.sampled_from([".", "", "。", "\n", ", and"]))
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=BODIES,
    provider=PROVIDERS,
    model=st.text(max_size=20),
    cache_safe=st.booleans(),
    first=st.booleans(),
    owner=IDS,
    session=st.one_of(st.sampled_from(["", "s1"]), IDS),
)
def test_inject_never_fails_on_any_body(enabled, body, provider, model, cache_safe, first, owner, session):
    try:
        resp = inject(
            enabled,
            body,
            api_key_id=owner,
            provider=provider,
            model=model,
            session_id=session,
            options=epb.InjectOptions(cache_safe=cache_safe, system_message_must_be_first=first),
        )
    except grpc.RpcError as err:  # pragma: no cover - the failure report
        pytest.fail(f"Inject failed with {err.code()}: {err.details()} for {body!r}")
    sent = as_dict(struct(body))
    out = as_dict(resp.request)
    if not resp.injected:
        assert out == sent
    else:
        assert {k: v for k, v in out.items() if k != "messages"} == {k: v for k, v in sent.items() if k != "messages"}
        assert isinstance(out["messages"], list)
        assert len(out["messages"]) in (len(sent["messages"]), len(sent["messages"]) + 1)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=EXTRACT_TEXTS,
    user=st.one_of(st.just(""), EXTRACT_TEXTS),
    wait=st.booleans(),
    dry=st.booleans(),
    owner=IDS,
    session=st.one_of(st.sampled_from(["", "s1", "sess-2"]), IDS),
)
def test_extract_never_fails_on_any_text(enabled, text, user, wait, dry, owner, session):
    """OK, or INVALID_ARGUMENT for an owner/session id CreateMemory would refuse (too long,
    reserved); never INTERNAL or UNKNOWN."""
    try:
        resp = enabled.engine.Extract(
            epb.ExtractRequest(
                assistant_message=text, user_message=user, api_key_id=owner, session_id=session, wait=wait, dry_run=dry
            )
        )
    except grpc.RpcError as err:
        if err.code() is C.INVALID_ARGUMENT and violated_fields(err) <= {"apiKeyId", "sessionId"}:
            return
        pytest.fail(f"Extract failed with {err.code()}: {err.details()} for {text!r} / {user!r}")
    for fact in resp.facts:
        assert fact.key.startswith(fact.category + ":") and len(fact.content) >= 2
    if dry or not owner:
        assert resp.stored == 0 and resp.accepted is False
    elif wait:
        assert resp.stored == len(resp.facts)
    else:
        assert resp.accepted is bool(resp.facts)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_inject_with_non_finite_number_in_body_does_not_fail(enabled, bad):
    """A Struct number may be NaN/±Infinity on the gRPC wire (JSON cannot carry it). Found
    failing with INTERNAL (json_format refuses to convert it); the body must still go through."""
    body = struct(CHAT)
    body.fields["temperature"].number_value = bad
    body.fields["nested"].struct_value.fields["x"].number_value = bad
    try:
        resp = enabled.engine.Inject(epb.InjectRequest(request=body, provider="openai", api_key_id=OWNER))
    except grpc.RpcError as err:
        assert err.code() is C.INVALID_ARGUMENT, (err.code(), err.details())
        return
    assert resp.injected is True
    for value in (
        resp.request.fields["temperature"].number_value,
        resp.request.fields["nested"].struct_value.fields["x"].number_value,
    ):
        assert (math.isnan(value) and math.isnan(bad)) or value == bad
