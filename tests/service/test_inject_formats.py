"""Inject in every provider's request format, and the relevance floor (minScore) and item
limit of Retrieve and Inject, through the real gRPC server.

Each injected body is checked against the provider's published request rules
(tests/support/provider_schemas.py): Anthropic has no system role inside `messages`, Gemini's
roles are user and model, Responses takes `instructions` as a string.
"""

from __future__ import annotations

import math
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from tests.conftest import make_config, start_server
from tests.support.provider_schemas import (
    VALIDATORS,
    anthropic_body,
    chat_body,
    gemini_body,
    responses_body,
)
from tests.support.rpc_errors import violated_fields
from tests.support.vectors import set_memory, struct, warm

C = grpc.StatusCode
OWNER = "key-formats"
DB_MEMORY = "I will use PostgreSQL for this project"
DB_QUESTION = "Which database will I use for this project?"
OTHER_MEMORIES = ["User prefers concise answers", "User has a dog named Rex", "User lives in Berlin"]
UNRELATED = "Write a haiku about the ocean at night"
ONE_SHARED_WORD = "Can you help me write a Python script to parse the logs of my project?"
MEMORY_PREFIX = "Memory context: "
BODIES = {
    "anthropic": lambda q: anthropic_body(q),
    "gemini": lambda q: gemini_body(q),
    "openai-responses": lambda q: responses_body(q),
    "openai-chat": lambda q: chat_body(q),
}


def as_dict(s: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(s)


def sent(body: dict[str, Any]) -> dict[str, Any]:
    """The body as the server receives it (a Struct: every number is a double)."""
    return as_dict(struct(body))


def create(stubs, content: str, owner: str = OWNER, **fields: Any) -> str:
    return stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id=owner, content=content, **fields)).id


def inject(stubs, body: dict[str, Any], provider: str = "", owner: str = OWNER, **fields: Any) -> epb.InjectResponse:
    return stubs.engine.Inject(epb.InjectRequest(request=struct(body), provider=provider, api_key_id=owner, **fields))


def retrieve(stubs, query: str, owner: str = OWNER, **fields: Any) -> epb.RetrieveResponse:
    return stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id=owner, query=query, **fields))


def valid(fmt: str, body: dict[str, Any]) -> dict[str, Any]:
    problems = VALIDATORS[fmt](body)
    assert problems == [], problems
    return body


def assert_unchanged(resp: epb.InjectResponse, body: dict[str, Any]) -> None:
    assert resp.injected is False, resp
    assert as_dict(resp.request) == sent(body)
    assert list(resp.memory_ids) == [] and resp.role == "" and resp.format == ""
    assert resp.skipped_reason


@pytest.fixture
def stored(server, stubs):
    """Memory on (keyword retrieval: no embedding source), the PostgreSQL memory of the
    examples in README.md and docs/injection.md and three unrelated ones; returns the stubs
    and the PostgreSQL memory's id."""
    set_memory(stubs, enabled=True)
    db_id = create(stubs, DB_MEMORY, key="decision:db", type="episodic")
    for content in OTHER_MEMORIES:
        create(stubs, content)
    return stubs, db_id


# ---- every format ------------------------------------------------------------------------------


BLOCKS = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]


@pytest.mark.parametrize(
    "system,provider",
    [("You are terse.", "anthropic"), (BLOCKS, "anthropic"), (None, "anthropic"), ("You are terse.", ""), (BLOCKS, "")],
    ids=["string", "blocks", "absent", "string-by-shape", "blocks-by-shape"],
)
def test_anthropic_gets_top_level_system_never_a_system_message(stored, system, provider):
    """Without a provider, the top-level `system` shows the format (a body without it looks
    exactly like an OpenAI chat body)."""
    stubs, db_id = stored
    body = anthropic_body(DB_QUESTION, system=system)
    resp = inject(stubs, body, provider)
    assert resp.injected and resp.format == "anthropic" and resp.role == "system"
    assert list(resp.memory_ids) == [db_id]
    out = valid("anthropic", as_dict(resp.request))
    assert out["messages"] == sent(body)["messages"]
    first = out["system"] if isinstance(out["system"], str) else out["system"][0]["text"]
    assert first.startswith(MEMORY_PREFIX + DB_MEMORY)
    if isinstance(system, list):
        assert out["system"][1:] == sent({"s": system})["s"], "the caller's blocks follow, cache_control kept"


@pytest.mark.parametrize("provider", ["gemini", "google", ""])
def test_gemini_gets_system_instruction_and_contents_keep_user_and_model_roles(stored, provider):
    stubs, db_id = stored
    body = gemini_body(DB_QUESTION)
    resp = inject(stubs, body, provider)
    assert resp.injected and resp.format == "gemini" and resp.role == "system"
    assert list(resp.memory_ids) == [db_id]
    out = valid("gemini", as_dict(resp.request))
    assert out["contents"] == sent(body)["contents"]
    assert out["generationConfig"] == sent(body)["generationConfig"]
    assert out["systemInstruction"]["parts"] == [
        {"text": MEMORY_PREFIX + DB_MEMORY},
        {"text": "You are a careful assistant."},
    ]


@pytest.mark.parametrize("as_items", [False, True], ids=["input-string", "input-items"])
def test_responses_gets_instructions(stored, as_items):
    stubs, db_id = stored
    body = responses_body(DB_QUESTION, as_items=as_items)
    resp = inject(stubs, body, "openai")
    assert resp.injected and resp.format == "openai-responses" and list(resp.memory_ids) == [db_id]
    out = valid("openai-responses", as_dict(resp.request))
    assert out["instructions"] == MEMORY_PREFIX + DB_MEMORY + "\n\nYou are a careful assistant."
    assert out["input"] == sent(body)["input"]


@pytest.mark.parametrize("fmt", ["anthropic", "gemini"])
def test_cache_safe_puts_the_memory_into_the_last_user_turn(stored, fmt):
    stubs, _ = stored
    body = BODIES[fmt](DB_QUESTION)
    resp = inject(stubs, body, fmt, options=epb.InjectOptions(cache_safe=True))
    assert resp.injected and resp.role == "user"
    out, before = valid(fmt, as_dict(resp.request)), sent(body)
    turns = "messages" if fmt == "anthropic" else "contents"
    assert out[turns][:-1] == before[turns][:-1], "the prompt-cache prefix is unchanged"
    assert {k: v for k, v in out.items() if k != turns} == {k: v for k, v in before.items() if k != turns}
    last = out[turns][-1]
    parts = last["content"] if fmt == "anthropic" else last["parts"]
    assert parts[0]["text"] == MEMORY_PREFIX + DB_MEMORY and parts[1]["text"] == DB_QUESTION


@pytest.mark.parametrize("fmt", ["anthropic", "gemini", "openai-responses"])
def test_models_that_reject_the_system_role_get_a_user_turn_in_every_format(stored, fmt):
    stubs, _ = stored
    body = BODIES[fmt](DB_QUESTION)
    resp = inject(stubs, body, "openrouter" if fmt == "gemini" else "", model="glm-4.7")
    assert resp.injected and resp.role == "user" and resp.format == fmt
    out, before = valid(fmt, as_dict(resp.request)), sent(body)
    for slot in ("system", "systemInstruction", "instructions"):
        assert out.get(slot) == before.get(slot), f"{slot} is untouched"
    assert MEMORY_PREFIX + DB_MEMORY in str(out)


def test_a_body_in_no_known_format_is_returned_unchanged(stored):
    stubs, _ = stored
    for body in ({"prompt": DB_QUESTION}, {"contents": DB_QUESTION}):
        resp = inject(stubs, body, "gemini")
        assert_unchanged(resp, body)
        assert "format" in resp.skipped_reason


# ---- the relevance floor -----------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["hybrid", "semantic", "recent"])
@pytest.mark.parametrize("fmt", list(BODIES))
def test_the_readme_example_injects_and_unrelated_prompts_inject_nothing(stored, strategy, fmt):
    """Semantic retrieval without vectors falls back to the newest memories and used to
    inject all of them; one shared word ("project") used to inject the PostgreSQL memory."""
    stubs, db_id = stored
    set_memory(stubs, strategy=strategy)
    resp = inject(stubs, BODIES[fmt](DB_QUESTION), fmt)
    assert resp.injected and list(resp.memory_ids) == [db_id]
    for question in (UNRELATED, ONE_SHARED_WORD):
        body = BODIES[fmt](question)
        assert_unchanged(inject(stubs, body, fmt), body)
    shared = inject(stubs, BODIES[fmt](ONE_SHARED_WORD), fmt)
    assert shared.below_min_score >= 1 and "relevance floor" in shared.skipped_reason


def test_min_score_zero_turns_the_floor_off(stored):
    stubs, db_id = stored
    resp = inject(stubs, chat_body(ONE_SHARED_WORD), "openai", min_score=0)
    assert resp.injected and list(resp.memory_ids) == [db_id] and resp.below_min_score == 0
    set_memory(stubs, strategy="semantic")
    everything = inject(stubs, chat_body(UNRELATED), "openai", min_score=0)
    assert len(everything.memory_ids) == 4, "without a floor the newest memories are all injected"


def test_an_explicit_min_score_is_the_floor_for_keyword_overlap(stored):
    stubs, db_id = stored
    # DB_QUESTION and the memory have 3 terms each and share 2 (use, project): 2 x 2 / 6.
    assert list(inject(stubs, chat_body(DB_QUESTION), "openai", min_score=0.66).memory_ids) == [db_id]
    refused = inject(stubs, chat_body(DB_QUESTION), "openai", min_score=0.7)
    assert not refused.injected and refused.below_min_score >= 1


def test_retrieve_has_a_floor_by_default_says_so_and_min_score_0_turns_it_off(stored):
    stubs, db_id = stored
    set_memory(stubs, strategy="semantic")  # no vectors: no keyword match → the newest memories
    floored = retrieve(stubs, UNRELATED)
    assert list(floored.memories) == [] and floored.resolution.below_min_score == 4
    assert (floored.resolution.keyword_floor, floored.resolution.vector_floor) == (0.10, 0.25)  # search's defaults
    found = retrieve(stubs, DB_QUESTION)
    assert [m.id for m in found.memories] == [db_id]
    plain = retrieve(stubs, UNRELATED, min_score=0)
    assert len(plain.memories) == 4 and plain.resolution.below_min_score == 0
    assert (plain.resolution.keyword_floor, plain.resolution.vector_floor) == (0, 0)
    explicit = retrieve(stubs, DB_QUESTION, min_score=0.5)
    assert [m.id for m in explicit.memories] == [db_id] and explicit.resolution.keyword_floor == 0.5
    newest = retrieve(stubs, "", strategy="recent")  # no query: nothing to measure relevance against
    assert len(newest.memories) == 4 and newest.resolution.keyword_floor == 0


# ---- the limit ---------------------------------------------------------------------------------


def test_limit_keeps_the_best_ranked_items(server, stubs):
    set_memory(stubs, enabled=True)
    for i in range(5):
        create(stubs, f"PostgreSQL tuning note {i}: " + "vacuum " * i)
    ranked = [m.id for m in retrieve(stubs, "PostgreSQL tuning").memories]
    assert len(ranked) == 5
    assert [m.id for m in retrieve(stubs, "PostgreSQL tuning", limit=2).memories] == ranked[:2]
    resp = inject(stubs, gemini_body("Any PostgreSQL tuning advice?"), "gemini", limit=1)
    assert resp.injected and len(resp.memory_ids) == 1
    assert as_dict(resp.request)["systemInstruction"]["parts"][0]["text"].count("\n") == 0


# ---- bad values --------------------------------------------------------------------------------

BAD_VALUES = [
    ({"limit": 0}, "limit"),
    ({"limit": 101}, "limit"),
    ({"min_score": -0.01}, "minScore"),
    ({"min_score": 1.5}, "minScore"),
    ({"min_score": math.nan}, "minScore"),
    ({"min_score": math.inf}, "minScore"),
]


@pytest.mark.parametrize("fields,name", BAD_VALUES, ids=[f"{n}={list(f.values())[0]}" for f, n in BAD_VALUES])
def test_out_of_range_limit_or_min_score_is_invalid_argument_naming_the_field(stored, fields, name):
    stubs, _ = stored
    calls = [
        lambda: retrieve(stubs, DB_QUESTION, **fields),
        lambda: inject(stubs, chat_body(DB_QUESTION), "openai", **fields),
    ]
    for call in calls:
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.code() == C.INVALID_ARGUMENT
        assert violated_fields(info.value) == {name}
    set_memory(stubs, enabled=False)
    with pytest.raises(grpc.RpcError) as info:
        inject(stubs, chat_body(DB_QUESTION), "openai", **fields)
    assert info.value.code() == C.INVALID_ARGUMENT, "refused whatever the settings say"


# ---- the floor on vector similarity (MiniLM) ---------------------------------------------------


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """One server with the local MiniLM source, warmed, and the four memories stored."""
    handle = start_server(make_config(tmp_path_factory.mktemp("inject-minilm")))
    stubs = handle.stubs()
    set_memory(stubs, enabled=True, embeddingSource="transformers", transformersEnabled=True)
    warm(handle)
    ids = {content: create(stubs, content) for content in [DB_MEMORY, *OTHER_MEMORIES]}
    yield stubs, ids
    handle.stop()


def test_with_vectors_related_memories_pass_the_floor_and_unrelated_ones_do_not(minilm):
    """The vector tier returns its nearest memories whatever their distance: without the
    floor every stored memory was injected into every prompt."""
    stubs, ids = minilm
    assert list(inject(stubs, chat_body(DB_QUESTION), "openai").memory_ids) == [ids[DB_MEMORY]]
    # No shared word: only the embedding relates a pet to a dog.
    pet = inject(stubs, anthropic_body("What pet do I have?"), "anthropic")
    assert list(pet.memory_ids) == [ids["User has a dog named Rex"]]
    valid("anthropic", as_dict(pet.request))
    body = gemini_body(UNRELATED)
    unrelated = inject(stubs, body, "gemini")
    assert_unchanged(unrelated, body)
    assert unrelated.below_min_score == 4
    assert retrieve(stubs, UNRELATED).resolution.below_min_score == 4, "Retrieve has a floor too"
    assert [m.id for m in retrieve(stubs, "What pet do I have?").memories] == [ids["User has a dog named Rex"]]
    assert len(retrieve(stubs, UNRELATED, min_score=0).memories) == 4
