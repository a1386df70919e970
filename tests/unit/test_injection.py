"""Memory injection (the opt-out headers, placement). Pure functions, no server."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsvc.core.injection.inject import (
    NO_MEMORY_HEADERS,
    Injection,
    InjectOptions,
    detect_format,
    inject,
    last_user_text,
    memory_text,
    no_memory_requested,
    role_for,
)
from tests.support.provider_schemas import (
    VALIDATORS,
    anthropic_body,
    anthropic_problems,
    chat_body,
    chat_problems,
    gemini_body,
    gemini_problems,
    responses_body,
    responses_problems,
)

TOUCHED_KEYS = {
    "openai-chat": {"messages"},
    "openai-responses": {"instructions", "input"},
    "anthropic": {"system", "messages"},
    "gemini": {"systemInstruction", "system_instruction", "contents"},
}

MEMS = ["likes tea", "lives in Oslo"]
TEXT = "Memory context: likes tea\nlives in Oslo"
CACHE_SAFE = InjectOptions(cache_safe=True)
MUST_BE_FIRST = InjectOptions(system_message_must_be_first=True)
BOTH = InjectOptions(cache_safe=True, system_message_must_be_first=True)


def body_with(*messages: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages), **extra}


def sys(content: Any = "You are terse.") -> dict[str, Any]:
    return {"role": "system", "content": content}


def user(content: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: str = "hello") -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def run_unmutated(body: Any, *args: Any, **kwargs: Any) -> Injection:
    """inject(), asserting that the input body is deep-equal to a deepcopy taken before."""
    before = copy.deepcopy(body)
    result = inject(body, *args, **kwargs)
    assert body == before
    return result


# -- memory text -------------------------------------------------------------------------------


def test_memory_text_trims_and_drops_blanks() -> None:
    assert memory_text(["  a ", "", "b"]) == "Memory context: a\nb"


@pytest.mark.parametrize("contents", [[], [""], ["   ", "\n\t"]])
def test_memory_text_none_when_nothing_usable(contents: list[str]) -> None:
    assert memory_text(contents) is None


def test_memory_text_skips_non_strings() -> None:
    assert memory_text(["a", None, 3, "b"]) == "Memory context: a\nb"  # type: ignore[list-item]


# -- role matrix -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("o1", ""),
        ("O1-MINI", ""),
        ("o1-preview", ""),
        ("glm", ""),
        ("glmt", ""),
        ("glm-cn", ""),
        ("zai", ""),
        ("qianfan", ""),
        ("QianFan", "whatever"),
        ("openrouter", "glm-4.7"),
        ("baidu", "ernie-4"),
        ("openrouter", "GLM-4.5-Air"),
        ("openai", "O1-MINI"),
        ("openrouter", "openai/o1-mini"),
        ("openrouter", "z-ai/glm-4.6"),
        (" zai ", ""),
    ],
)
def test_role_user_for_providers_rejecting_system(provider: str, model: str) -> None:
    assert role_for(provider, model) == "user"
    result = run_unmutated(body_with(sys(), user()), MEMS, provider, model)
    assert result.injected and result.role == "user"
    assert result.body["messages"][0] == {"role": "user", "content": TEXT}
    assert result.body["messages"][1:] == [sys(), user()]


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", ""),
        ("deepseek", "deepseek-chat"),
        ("some-unknown", ""),
        ("", ""),
        ("openai", "gpt-4o"),
        ("openai", "o1-2024-12-17"),  # not listed: only the exact names and prefixes count
        ("openrouter", "zhipu/chatglm-6b"),  # "glm" inside, not a "glm-" prefix
    ],
)
def test_role_system_for_everyone_else(provider: str, model: str) -> None:
    assert role_for(provider, model) == "system"
    result = run_unmutated(body_with(user()), MEMS, provider, model)
    assert result.role == "system"
    assert result.body["messages"] == [{"role": "system", "content": TEXT}, user()]


def test_role_for_never_raises_on_non_strings() -> None:
    assert role_for(None, None) == "system"  # type: ignore[arg-type]


def test_body_model_used_when_model_argument_empty() -> None:
    body = {"model": "glm-4.7", "messages": [user()]}
    assert run_unmutated(body, MEMS, "openrouter").role == "user"
    # an explicit model argument wins over the body's
    assert run_unmutated(body, MEMS, "openrouter", "gpt-4o").role == "system"


# -- default placement -------------------------------------------------------------------------


def test_memory_goes_before_the_users_own_system_prompt() -> None:
    result = run_unmutated(body_with(sys(), user()), MEMS, "openai")
    msgs = result.body["messages"]
    assert len(msgs) == 3
    assert msgs[0] == {"role": "system", "content": TEXT}
    assert msgs[1:] == [sys(), user()]
    assert result.text == TEXT


def test_empty_messages_list_gets_the_memory() -> None:
    result = run_unmutated(body_with(), MEMS, "openai")
    assert result.body["messages"] == [{"role": "system", "content": TEXT}]


# -- no-op paths return the same object ---------------------------------------------------------


@pytest.mark.parametrize("contents", [[], ["", "   ", "\n"]])
@pytest.mark.parametrize("options", [InjectOptions(), CACHE_SAFE, MUST_BE_FIRST, BOTH])
def test_no_memories_returns_identical_body(contents: list[str], options: InjectOptions) -> None:
    body = body_with(sys(), user())
    result = run_unmutated(body, contents, "openai", options=options)
    assert result.body is body
    assert result == Injection(body=body, injected=False, role=None, text=None)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"model": "gpt-4o"},
        {"messages": None},
        {"messages": "hi"},
        {"messages": {"role": "user"}},
        {"messages": ("a", "b")},
    ],
)
def test_body_without_message_list_is_returned_unchanged(body: dict[str, Any]) -> None:
    result = run_unmutated(body, MEMS, "openai")
    assert result.body is body
    assert not result.injected and result.role is None and result.text is None


@pytest.mark.parametrize("body", [None, "text", 42, ["messages"]])
def test_non_mapping_body_never_raises(body: Any) -> None:
    result = inject(body, MEMS, "openai")
    assert result.body is body and not result.injected


def test_non_dict_messages_are_kept_as_they_are() -> None:
    odd = ["raw string", 7, None, ["nested"], user()]
    result = run_unmutated(body_with(*odd), MEMS, "openai", options=CACHE_SAFE)
    assert result.body["messages"] == ["raw string", 7, None, ["nested"], {"role": "system", "content": TEXT}, user()]


# -- other fields survive ---------------------------------------------------------------------


def test_every_other_field_survives() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    body = body_with(sys(), user(), temperature=0.2, tools=tools, stream=True, x_unknown={"deep": [1, 2]})
    result = run_unmutated(body, MEMS, "openai")
    assert result.body is not body
    assert {k: v for k, v in result.body.items() if k != "messages"} == {
        "model": "gpt-4o",
        "temperature": 0.2,
        "tools": tools,
        "stream": True,
        "x_unknown": {"deep": [1, 2]},
    }
    assert result.body["messages"] is not body["messages"]


# -- cache_safe --------------------------------------------------------------------------------


def test_cache_safe_inserts_before_last_user_message() -> None:
    history = [sys(), user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("q3")]
    result = run_unmutated(body_with(*history), MEMS, "openai", options=CACHE_SAFE)
    msgs = result.body["messages"]
    assert msgs[:5] == history[:5]  # the cached prefix is untouched
    assert msgs[5] == {"role": "system", "content": TEXT}
    assert msgs[6] == user("q3")
    assert len(msgs) == 7


def test_cache_safe_last_user_not_last_message() -> None:
    history = [user("q1"), assistant("a1"), user("q2"), assistant("partial")]
    result = run_unmutated(body_with(*history), MEMS, "o1", options=CACHE_SAFE)
    assert result.body["messages"] == [
        user("q1"),
        assistant("a1"),
        {"role": "user", "content": TEXT},
        user("q2"),
        assistant("partial"),
    ]


def test_cache_safe_without_user_message_prepends() -> None:
    result = run_unmutated(body_with(sys(), assistant()), MEMS, "openai", options=CACHE_SAFE)
    assert result.body["messages"] == [{"role": "system", "content": TEXT}, sys(), assistant()]


# -- system_message_must_be_first --------------------------------------------------------------


def test_must_be_first_merges_string_system_prompt() -> None:
    body = body_with(sys("You are terse."), user())
    result = run_unmutated(body, MEMS, "openai", options=MUST_BE_FIRST)
    msgs = result.body["messages"]
    assert len(msgs) == 2
    assert msgs[0] == {"role": "system", "content": TEXT + "\n\n" + "You are terse."}
    assert msgs[1] == user()
    assert result.role == "system" and result.text == TEXT


def test_must_be_first_keeps_other_keys_of_the_merged_message() -> None:
    first = {"role": "system", "content": "S", "name": "policy", "cache_control": {"t": 1}}
    result = run_unmutated(body_with(first, user()), MEMS, "openai", options=MUST_BE_FIRST)
    assert result.body["messages"][0] == {**first, "content": TEXT + "\n\nS"}


def test_must_be_first_prepends_text_part_to_content_list() -> None:
    parts = [{"type": "text", "text": "You are terse."}]
    body = body_with(sys(parts), user())
    result = run_unmutated(body, MEMS, "openai", options=MUST_BE_FIRST)
    assert result.body["messages"][0] == {
        "role": "system",
        "content": [{"type": "text", "text": TEXT}, {"type": "text", "text": "You are terse."}],
    }


def test_must_be_first_without_leading_system_prepends() -> None:
    body = body_with(user(), sys())  # a system message, but not at position 0
    result = run_unmutated(body, MEMS, "openai", options=MUST_BE_FIRST)
    assert result.body["messages"] == [{"role": "system", "content": TEXT}, user(), sys()]


def test_must_be_first_with_non_text_system_content_prepends() -> None:
    body = body_with(sys(None), user())
    result = run_unmutated(body, MEMS, "openai", options=MUST_BE_FIRST)
    assert result.body["messages"] == [{"role": "system", "content": TEXT}, sys(None), user()]


def test_must_be_first_ignored_for_user_role() -> None:
    result = run_unmutated(body_with(sys(), user()), MEMS, "glm", options=MUST_BE_FIRST)
    assert result.body["messages"] == [{"role": "user", "content": TEXT}, sys(), user()]


def test_must_be_first_wins_over_cache_safe_for_system_role() -> None:
    history = [sys("S"), user("q1"), assistant("a1"), user("q2")]
    result = run_unmutated(body_with(*history), MEMS, "openai", options=BOTH)
    assert result.body["messages"] == [sys(TEXT + "\n\nS"), *history[1:]]


def test_cache_safe_still_applies_for_user_role_with_both_options() -> None:
    history = [user("q1"), assistant("a1"), user("q2")]
    result = run_unmutated(body_with(*history), MEMS, "qianfan", options=BOTH)
    assert result.body["messages"] == [user("q1"), assistant("a1"), {"role": "user", "content": TEXT}, user("q2")]


# -- no-memory header --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"X-OmniRoute-No-Memory": "TRUE"}, True),
        ({"x-omniroute-no-memory": "1"}, True),
        ({"x-omniroute-no-memory": " yes "}, True),
        ({"X-OMNIROUTE-NO-MEMORY": "Yes"}, True),
        ({"x-omniroute-no-memory": "false"}, False),
        ({"x-omniroute-no-memory": "0"}, False),
        ({"x-omniroute-no-memory": ""}, False),
        ({"x-omniroute-no-memory": "on"}, False),
        ({}, False),
        ({"authorization": "Bearer x"}, False),
        ({"x-memsvc-no-memory": "true"}, True),
        ({"X-Memsvc-No-Memory": " 1"}, True),
        ({"x-memsvc-no-memory": "no", "x-omniroute-no-memory": "yes"}, True),
        ({"x-omniroute-no-memory": b"true"}, False),  # -bin style bytes are not a flag
    ],
)
def test_no_memory_requested(headers: dict[str, Any], expected: bool) -> None:
    assert no_memory_requested(headers) is expected


def test_no_memory_requested_accepts_grpc_metadata_pairs() -> None:
    assert no_memory_requested((("x-omniroute-no-memory", "true"), ("other", "x"))) is True
    assert no_memory_requested([("x-memsvc-no-memory", "0")]) is False
    assert no_memory_requested(None) is False


def test_header_names_are_lowercase() -> None:
    assert NO_MEMORY_HEADERS == ("x-omniroute-no-memory", "x-memsvc-no-memory")


# -- properties --------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=20,
)
message_like = (
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool", "x"]) | json_values},
        optional={"content": st.text() | st.lists(json_values, max_size=3) | json_values},
    )
    | json_values
)
bodies = st.dictionaries(st.text(max_size=10), json_values, max_size=6) | st.fixed_dictionaries(
    {"messages": st.lists(message_like, max_size=6) | json_values},
    optional={"model": json_values, "stream": st.booleans(), "extra": json_values},
)
providers = st.sampled_from(["openai", "o1", "GLM", "qianfan", "unknown", ""]) | st.text(max_size=10)
models = st.sampled_from(["", "glm-4.7", "ernie-4", "openai/o1-mini", "gpt-4o"]) | st.text(max_size=10)
option_sets = st.builds(InjectOptions, st.booleans(), st.booleans())


@settings(max_examples=300)
@given(bodies, st.lists(st.text(max_size=20), max_size=4), providers, models, option_sets)
def test_inject_never_raises_and_never_mutates(
    body: dict[str, Any], contents: list[str], provider: str, model: str, options: InjectOptions
) -> None:
    result = run_unmutated(body, contents, provider, model, options)
    text = memory_text(contents)
    if not result.injected:
        assert result.body is body
        assert text is None or detect_format(body, provider) is None
        return
    assert result.text == text and result.role in ("system", "user")
    assert result.format == detect_format(body, provider).name
    touched = TOUCHED_KEYS[result.format]
    assert {k: v for k, v in result.body.items() if k not in touched} == {
        k: v for k, v in body.items() if k not in touched
    }
    if result.format == "openai-chat":
        new, old = result.body["messages"], body["messages"]
        assert len(new) in (len(old), len(old) + 1)  # merged, or exactly one message added
        memory_msg = {"role": result.role, "content": text}
        if len(new) == len(old) + 1:
            index = new.index(memory_msg)
            assert new[:index] + new[index + 1 :] == old


# -- formats: every injected body is still valid for its API ----------------------------------

QUESTION = "Which database will I use for this project?"
SYSTEM = "You are a careful assistant."
ALL_OPTIONS = [InjectOptions(), CACHE_SAFE, MUST_BE_FIRST, BOTH]


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for item in value for s in strings_in(item)] if isinstance(value, list) else []


def valid(fmt: str, body: dict[str, Any]) -> dict[str, Any]:
    problems = VALIDATORS[fmt](body)
    assert problems == [], problems
    return body


def test_the_sample_bodies_are_valid_and_the_validators_catch_what_injection_must_avoid() -> None:
    """The validators reject what each API rejects, so a passing check means something."""
    assert anthropic_problems(anthropic_body(QUESTION)) == []
    assert anthropic_problems(
        {**anthropic_body(QUESTION), "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "q"}]}
    )
    assert anthropic_problems({**anthropic_body(QUESTION), "system": {"text": "x"}})
    assert anthropic_problems(
        {
            **anthropic_body(QUESTION),
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "tool_result", "tool_use_id": "t", "content": "r"},
                    ],
                }
            ],
        }
    )
    assert gemini_problems(gemini_body(QUESTION)) == []
    assert gemini_problems({**gemini_body(QUESTION), "contents": [{"role": "system", "parts": [{"text": "x"}]}]})
    assert gemini_problems({**gemini_body(QUESTION), "systemInstruction": "just a string"})
    assert gemini_problems({**gemini_body(QUESTION), "messages": []})
    assert responses_problems(responses_body(QUESTION)) == []
    assert responses_problems(responses_body(QUESTION, as_items=True)) == []
    assert responses_problems({**responses_body(QUESTION), "instructions": ["x"]})
    assert responses_problems({**responses_body(QUESTION), "input": [{"role": "tool", "content": "x"}]})
    assert chat_problems(chat_body(QUESTION)) == []
    assert chat_problems({"model": "m", "messages": [{"role": "model", "content": "x"}]})


@pytest.mark.parametrize("options", ALL_OPTIONS, ids=["default", "cache_safe", "must_be_first", "both"])
@pytest.mark.parametrize(
    "body,provider",
    [
        (anthropic_body(QUESTION), "anthropic"),
        (
            anthropic_body(QUESTION, system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]),
            "anthropic",
        ),
        (anthropic_body(QUESTION, system=None), "anthropic"),
        (anthropic_body(QUESTION), ""),
        (anthropic_body(QUESTION), "anthropic-glm"),
        (gemini_body(QUESTION), "gemini"),
        (gemini_body(QUESTION, system=None), "google"),
        (gemini_body(QUESTION), ""),
        (responses_body(QUESTION), "openai"),
        (responses_body(QUESTION, instructions=None), "openai"),
        (responses_body(QUESTION, as_items=True), ""),
        (chat_body(QUESTION), "openai"),
    ],
    ids=[
        "anthropic-string-system",
        "anthropic-block-system",
        "anthropic-no-system",
        "anthropic-by-shape",
        "anthropic-unknown-provider",
        "gemini",
        "gemini-no-system",
        "gemini-by-shape",
        "responses-string",
        "responses-no-instructions",
        "responses-items-by-shape",
        "chat",
    ],
)
@pytest.mark.parametrize("model", ["", "glm-4.7"], ids=["system-role", "user-role"])
def test_every_format_stays_valid_for_its_api(
    body: dict[str, Any], provider: str, model: str, options: InjectOptions
) -> None:
    result = run_unmutated(body, MEMS, provider, model, options)
    assert result.injected and result.text == TEXT
    valid(result.format, result.body)
    assert any(TEXT in text for text in strings_in(result.body))
    assert set(result.body) - TOUCHED_KEYS[result.format] == set(body) - TOUCHED_KEYS[result.format]


# -- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_string_system_gets_the_memory_first_and_messages_are_untouched() -> None:
    body = anthropic_body(QUESTION)
    result = run_unmutated(body, MEMS, "anthropic")
    assert result.format == "anthropic" and result.role == "system"
    assert result.body["system"] == TEXT + "\n\n" + SYSTEM
    assert result.body["messages"] == body["messages"]
    assert all(m["role"] != "system" for m in result.body["messages"])


def test_anthropic_block_system_gets_a_text_block_first_and_keeps_cache_control() -> None:
    blocks = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    result = run_unmutated(anthropic_body(QUESTION, system=blocks), MEMS, "anthropic")
    assert result.body["system"] == [{"type": "text", "text": TEXT}, *blocks]


def test_anthropic_without_system_gets_one() -> None:
    result = run_unmutated(anthropic_body(QUESTION, system=None), MEMS, "anthropic")
    assert result.body["system"] == TEXT


def test_anthropic_cache_safe_puts_a_text_block_into_the_last_user_turn() -> None:
    body = anthropic_body(QUESTION)
    result = run_unmutated(body, MEMS, "anthropic", options=CACHE_SAFE)
    assert result.role == "user" and result.body["system"] == SYSTEM
    assert result.body["messages"][:2] == body["messages"][:2], "the cached prefix is unchanged"
    assert result.body["messages"][2] == {
        "role": "user",
        "content": [{"type": "text", "text": TEXT}, {"type": "text", "text": QUESTION}],
    }


def test_anthropic_text_goes_after_the_tool_results_of_a_turn() -> None:
    turn = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
            {"type": "text", "text": "And the database?"},
        ],
    }
    body = {
        **anthropic_body(QUESTION),
        "messages": [
            {"role": "user", "content": "Compute it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {}}]},
            turn,
        ],
    }
    result = run_unmutated(body, MEMS, "anthropic", options=CACHE_SAFE)
    assert result.body["messages"][2]["content"] == [
        turn["content"][0],
        {"type": "text", "text": TEXT},
        turn["content"][1],
    ]
    valid("anthropic", result.body)


def test_anthropic_user_role_model_merges_into_the_first_user_turn() -> None:
    body = anthropic_body(QUESTION)
    result = run_unmutated(body, MEMS, "anthropic", "glm-4.7")
    assert result.role == "user" and result.body["system"] == SYSTEM
    assert result.body["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": TEXT}, {"type": "text", "text": "Hello"}],
    }
    assert result.body["messages"][1:] == body["messages"][1:]


@pytest.mark.parametrize("options", [MUST_BE_FIRST, BOTH])
def test_anthropic_must_be_first_is_the_system_parameter(options: InjectOptions) -> None:
    result = run_unmutated(anthropic_body(QUESTION), MEMS, "anthropic", options=options)
    assert result.role == "system" and result.body["system"] == TEXT + "\n\n" + SYSTEM


def test_openai_shaped_body_sent_to_anthropic_stays_openai_shaped() -> None:
    """A gateway that translates later sends system messages inside messages: that body is
    not an Anthropic one, and is injected as chat."""
    result = run_unmutated(chat_body(QUESTION), MEMS, "anthropic")
    assert result.format == "openai-chat" and "system" not in result.body
    assert result.body["messages"][0] == {"role": "system", "content": TEXT}


# -- Gemini ------------------------------------------------------------------------------------


def test_gemini_system_instruction_gets_a_text_part_first() -> None:
    body = gemini_body(QUESTION)
    result = run_unmutated(body, MEMS, "gemini")
    assert result.format == "gemini" and result.role == "system"
    assert result.body["systemInstruction"] == {"parts": [{"text": TEXT}, {"text": SYSTEM}]}
    assert result.body["contents"] == body["contents"]
    assert result.body["generationConfig"] == body["generationConfig"]


def test_gemini_without_system_instruction_gets_one_and_snake_case_is_kept() -> None:
    assert run_unmutated(gemini_body(QUESTION, system=None), MEMS, "gemini").body["systemInstruction"] == {
        "parts": [{"text": TEXT}]
    }
    snake = {**gemini_body(QUESTION, system=None), "system_instruction": {"parts": [{"text": SYSTEM}]}}
    result = run_unmutated(snake, MEMS, "gemini")
    assert "systemInstruction" not in result.body
    assert result.body["system_instruction"] == {"parts": [{"text": TEXT}, {"text": SYSTEM}]}


def test_gemini_cache_safe_and_user_role_use_user_contents_never_a_system_role() -> None:
    body = gemini_body(QUESTION)
    cached = run_unmutated(body, MEMS, "gemini", options=CACHE_SAFE)
    assert cached.role == "user" and cached.body["systemInstruction"] == body["systemInstruction"]
    assert cached.body["contents"][:2] == body["contents"][:2]
    assert cached.body["contents"][2] == {"role": "user", "parts": [{"text": TEXT}, {"text": QUESTION}]}
    first = run_unmutated(body, MEMS, "gemini", "glm-4.7")
    assert first.body["contents"][0] == {"role": "user", "parts": [{"text": TEXT}, {"text": "Hello"}]}
    for result in (cached, first):
        assert {c.get("role") for c in result.body["contents"]} <= {"user", "model"}


def test_gemini_text_goes_after_function_responses() -> None:
    response = {"functionResponse": {"name": "lookup", "response": {"db": "?"}}}
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": QUESTION}]},
            {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {}}}]},
            {"role": "user", "parts": [response]},
        ]
    }
    result = run_unmutated(body, MEMS, "gemini", options=CACHE_SAFE)
    assert result.body["contents"][2]["parts"] == [response, {"text": TEXT}]
    valid("gemini", result.body)


def test_gemini_content_without_role_counts_as_the_users() -> None:
    body = {"contents": [{"parts": [{"text": QUESTION}]}]}
    assert last_user_text(body) == QUESTION
    result = run_unmutated(body, MEMS, "", options=CACHE_SAFE)
    assert result.body["contents"] == [{"parts": [{"text": TEXT}, {"text": QUESTION}]}]


# -- OpenAI Responses --------------------------------------------------------------------------


def test_responses_instructions_get_the_memory_first_and_input_is_untouched() -> None:
    body = responses_body(QUESTION)
    result = run_unmutated(body, MEMS, "openai")
    assert result.format == "openai-responses" and result.role == "system"
    assert result.body["instructions"] == TEXT + "\n\n" + SYSTEM and result.body["input"] == QUESTION
    assert run_unmutated(responses_body(QUESTION, None), MEMS, "openai").body["instructions"] == TEXT


def test_responses_cache_safe_adds_an_item_before_the_last_user_item() -> None:
    body = responses_body(QUESTION, as_items=True)
    result = run_unmutated(body, MEMS, "openai", options=CACHE_SAFE)
    assert result.body["instructions"] == SYSTEM
    assert result.body["input"] == [*body["input"][:2], {"role": "system", "content": TEXT}, body["input"][2]]
    as_string = run_unmutated(responses_body(QUESTION), MEMS, "openai", options=CACHE_SAFE)
    assert as_string.body["input"] == [{"role": "system", "content": TEXT}, {"role": "user", "content": QUESTION}]


def test_responses_user_role_model_gets_a_user_item_first() -> None:
    result = run_unmutated(responses_body(QUESTION), MEMS, "openai", "o1-mini")
    assert result.role == "user" and result.body["instructions"] == SYSTEM
    assert result.body["input"] == [{"role": "user", "content": TEXT}, {"role": "user", "content": QUESTION}]


# -- recognising the format --------------------------------------------------------------------


@pytest.mark.parametrize(
    "body,provider,expected",
    [
        (chat_body(QUESTION), "", "openai-chat"),
        ({"messages": [{"role": "user", "content": "q"}]}, "", "openai-chat"),
        ({"messages": [{"role": "user", "content": "q"}]}, "anthropic", "anthropic"),
        ({"messages": [{"role": "user", "content": "q"}], "system": "s"}, "", "anthropic"),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]},
            "deepseek",
            "anthropic",
        ),
        (chat_body(QUESTION), "anthropic", "openai-chat"),
        (chat_body(QUESTION), "gemini", "openai-chat"),
        (gemini_body(QUESTION), "", "gemini"),
        (gemini_body(QUESTION), "openrouter", "gemini"),
        (responses_body(QUESTION), "", "openai-responses"),
        (responses_body(QUESTION), "openai", "openai-responses"),
        ({"instructions": "be brief"}, "", "openai-responses"),
        ({"prompt": "q"}, "", None),
        ({"messages": "q"}, "anthropic", None),
        ({"contents": "q"}, "gemini", None),
    ],
)
def test_format_from_provider_then_shape(body: dict[str, Any], provider: str, expected: str | None) -> None:
    fmt = detect_format(body, provider)
    assert (fmt.name if fmt else None) == expected


@pytest.mark.parametrize(
    "body,expected",
    [
        (chat_body(QUESTION), QUESTION),
        (anthropic_body(QUESTION), QUESTION),
        (gemini_body(QUESTION), QUESTION),
        (responses_body(QUESTION), QUESTION),
        (responses_body(QUESTION, as_items=True), QUESTION),
        (
            {
                "model": "m",
                "max_tokens": 9,
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]},
                ],
            },
            QUESTION,
        ),
        (
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
                    {"role": "model", "parts": [{"text": "c"}]},
                ]
            },
            "a\nb",
        ),
        ({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}, ""),
        ({"prompt": QUESTION}, ""),
    ],
)
def test_the_query_is_the_last_user_text_of_each_format(body: dict[str, Any], expected: str) -> None:
    assert last_user_text(body) == expected


@pytest.mark.parametrize(
    "extra",
    [
        {"stop_sequences": ["\n\nHuman:"]},
        {"top_k": 5},
        {"anthropic_version": "x"},
        {"thinking": {"type": "enabled", "budget_tokens": 2048}},
    ],
)
def test_anthropic_only_fields_show_the_format_without_a_provider(extra: dict[str, Any]) -> None:
    plain = {**anthropic_body(QUESTION, system=None)}
    assert detect_format(plain).name == "openai-chat", "without evidence it is indistinguishable from chat"
    assert detect_format({**plain, **extra}).name == "anthropic"


format_bodies = st.fixed_dictionaries(
    {},
    optional={
        "messages": st.lists(message_like, max_size=4) | json_values,
        "system": st.text(max_size=10) | st.lists(json_values, max_size=3) | json_values,
        "contents": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "role": st.sampled_from(["user", "model"]) | json_values,
                    "parts": st.lists(
                        st.fixed_dictionaries(
                            {}, optional={"text": st.text(max_size=10) | json_values, "functionResponse": json_values}
                        ),
                        max_size=3,
                    )
                    | json_values,
                },
            )
            | json_values,
            max_size=4,
        )
        | json_values,
        "systemInstruction": json_values | st.fixed_dictionaries({"parts": st.lists(json_values, max_size=2)}),
        "input": st.text(max_size=10) | st.lists(message_like, max_size=4) | json_values,
        "instructions": st.text(max_size=10) | json_values,
        "top_k": st.integers(),
    },
)


@settings(max_examples=400)
@given(format_bodies, st.lists(st.text(max_size=20), max_size=3), providers, models, option_sets)
def test_every_format_handler_never_raises_and_never_mutates(
    body: dict[str, Any], contents: list[str], provider: str, model: str, options: InjectOptions
) -> None:
    result = run_unmutated(body, contents, provider, model, options)
    assert last_user_text(body, provider) is not None
    if result.injected:
        touched = TOUCHED_KEYS[result.format]
        assert {k: v for k, v in result.body.items() if k not in touched} == {
            k: v for k, v in body.items() if k not in touched
        }
        assert any(result.text in s for s in strings_in(result.body))
