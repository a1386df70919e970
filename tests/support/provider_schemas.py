"""Small validators of provider request bodies, written from each API's published request
schema, so tests can check that an injected body is still one the provider accepts.

Each `*_problems(body)` returns a list of the rules the body breaks (empty: valid). They
check the rules injection could break (roles, where a system prompt may go, the types of
content parts), not every field of each API.

- OpenAI Chat Completions (POST /v1/chat/completions): `model` and a non-empty `messages`
  array; roles system, developer, user, assistant, tool (function is legacy); content a
  string or an array of content parts; system/developer content parts are text only.
- OpenAI Responses (POST /v1/responses): `instructions` a string (or null), inserted as the
  first system/developer message; `input` a string or an array of items; a message item has
  role user, assistant, system or developer, `type` "message" when given, and content a
  string or parts (input_text, input_image, input_file; output_text/refusal for assistant).
- Anthropic Messages (POST /v1/messages): `model`, `max_tokens` and `messages` required;
  message roles are only user and assistant (there is no system role: the system prompt is
  the top-level `system`, a string or an array of text blocks); content a string or an
  array of blocks; text blocks must not be empty; in a user message, tool_result blocks come
  before any other block.
- Gemini generateContent (POST /v1beta/{model}:generateContent): `contents` an array of
  Content; a Content's role, when set, is "user" or "model"; `parts` a non-empty array of
  Part, each holding exactly one kind of data (text, inlineData, fileData, functionCall,
  functionResponse, executableCode, codeExecutionResult); `systemInstruction` a Content
  whose parts are text only.
"""

from __future__ import annotations

from typing import Any

CHAT_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
RESPONSES_ROLES = {"user", "assistant", "system", "developer"}
RESPONSES_INPUT_PARTS = {"input_text", "input_image", "input_file"}
RESPONSES_OUTPUT_PARTS = {"output_text", "refusal"}
ANTHROPIC_ROLES = {"user", "assistant"}
ANTHROPIC_BLOCKS = {
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
}
GEMINI_ROLES = {"user", "model"}
GEMINI_DATA = {
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    "inline_data",
    "file_data",
    "function_call",
    "function_response",
}


def chat_problems(body: dict[str, Any]) -> list[str]:
    problems = [] if isinstance(body.get("model"), str) else ["model is required"]
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return problems + ["messages must be a non-empty array"]
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in CHAT_ROLES:
            problems.append(f"messages[{i}].role must be one of {sorted(CHAT_ROLES)}")
            continue
        content = m.get("content")
        if m["role"] in ("system", "developer") and isinstance(content, list):
            if any(not isinstance(p, dict) or p.get("type") != "text" for p in content):
                problems.append(f"messages[{i}]: system content parts must be text")
        elif content is not None and not isinstance(content, (str, list)):
            problems.append(f"messages[{i}].content must be a string or an array of parts")
    return problems


def responses_problems(body: dict[str, Any]) -> list[str]:
    problems = [] if isinstance(body.get("model"), str) else ["model is required"]
    if "messages" in body:
        problems.append("messages is not a Responses field (input is)")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        problems.append("instructions must be a string")
    value = body.get("input")
    if isinstance(value, str) or value is None:
        return problems
    if not isinstance(value, list):
        return problems + ["input must be a string or an array of items"]
    for i, item in enumerate(value):
        problems += _responses_item_problems(i, item)
    return problems


def _responses_item_problems(i: int, item: Any) -> list[str]:
    if not isinstance(item, dict):
        return [f"input[{i}] must be an object"]
    if item.get("type", "message") != "message":
        return []  # function_call, function_call_output, ...: not message items
    if item.get("role") not in RESPONSES_ROLES:
        return [f"input[{i}].role must be one of {sorted(RESPONSES_ROLES)}"]
    content = item.get("content")
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [f"input[{i}].content must be a string or an array of parts"]
    allowed = RESPONSES_OUTPUT_PARTS if item["role"] == "assistant" else RESPONSES_INPUT_PARTS
    return [
        f"input[{i}].content[{j}].type must be one of {sorted(allowed)}"
        for j, p in enumerate(content)
        if not isinstance(p, dict) or p.get("type") not in allowed
    ]


def anthropic_problems(body: dict[str, Any]) -> list[str]:
    problems = [f"{k} is required" for k in ("model", "max_tokens") if k not in body]
    problems += _anthropic_system_problems(body.get("system"))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return problems + ["messages must be a non-empty array"]
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ANTHROPIC_ROLES:
            problems.append(f"messages[{i}].role must be user or assistant (there is no system role)")
            continue
        problems += _anthropic_content_problems(i, m)
    return problems


def _anthropic_system_problems(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return []
    if not isinstance(system, list):
        return ["system must be a string or an array of text blocks"]
    return [
        f"system[{j}] must be a non-empty text block"
        for j, b in enumerate(system)
        if not isinstance(b, dict) or b.get("type") != "text" or not b.get("text")
    ]


def _anthropic_content_problems(i: int, m: dict[str, Any]) -> list[str]:
    content = m.get("content")
    if isinstance(content, str):
        return [] if content else [f"messages[{i}].content must not be empty"]
    if not isinstance(content, list):
        return [f"messages[{i}].content must be a string or an array of blocks"]
    problems = []
    for j, b in enumerate(content):
        if not isinstance(b, dict) or b.get("type") not in ANTHROPIC_BLOCKS:
            problems.append(f"messages[{i}].content[{j}].type is not a content block type")
        elif b["type"] == "text" and not (isinstance(b.get("text"), str) and b["text"]):
            problems.append(f"messages[{i}].content[{j}]: text blocks must be non-empty")
    types = [b.get("type") if isinstance(b, dict) else None for b in content]
    last_result = max((k for k, t in enumerate(types) if t == "tool_result"), default=-1)
    if last_result > 0 and any(t != "tool_result" for t in types[:last_result]):
        problems.append(f"messages[{i}]: tool_result blocks must come before any other block")
    return problems


def gemini_problems(body: dict[str, Any]) -> list[str]:
    problems = ["messages is not a generateContent field (contents is)"] if "messages" in body else []
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return problems + ["contents must be a non-empty array"]
    for i, c in enumerate(contents):
        if not isinstance(c, dict):
            problems.append(f"contents[{i}] must be a Content object")
            continue
        if "role" in c and c["role"] not in GEMINI_ROLES:
            problems.append(f"contents[{i}].role must be 'user' or 'model'")
        problems += _gemini_parts_problems(f"contents[{i}]", c.get("parts"), GEMINI_DATA)
    for key in ("systemInstruction", "system_instruction"):
        if key in body:
            system = body[key]
            if not isinstance(system, dict):
                problems.append(f"{key} must be a Content object")
            else:
                problems += _gemini_parts_problems(key, system.get("parts"), {"text"})
    return problems


def _gemini_parts_problems(where: str, parts: Any, allowed: set[str]) -> list[str]:
    if not isinstance(parts, list) or not parts:
        return [f"{where}.parts must be a non-empty array"]
    problems = []
    for j, p in enumerate(parts):
        data = [k for k in p if k in GEMINI_DATA] if isinstance(p, dict) else []
        if len(data) != 1 or data[0] not in allowed:
            problems.append(f"{where}.parts[{j}] must hold exactly one of {sorted(allowed)}")
        elif data[0] == "text" and not isinstance(p["text"], str):
            problems.append(f"{where}.parts[{j}].text must be a string")
    return problems


VALIDATORS = {
    "openai-chat": chat_problems,
    "openai-responses": responses_problems,
    "anthropic": anthropic_problems,
    "gemini": gemini_problems,
}


# ---- real bodies of each format ------------------------------------------------------------


def anthropic_body(question: str, system: Any = "You are a careful assistant.") -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi! How can I help?"},
            {"role": "user", "content": question},
        ],
    }
    if system is not None:
        body["system"] = system
    return body


def gemini_body(question: str, system: str | None = "You are a careful assistant.") -> dict[str, Any]:
    body: dict[str, Any] = {
        "contents": [
            {"role": "user", "parts": [{"text": "Hello"}]},
            {"role": "model", "parts": [{"text": "Hi! How can I help?"}]},
            {"role": "user", "parts": [{"text": question}]},
        ],
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 512},
    }
    if system is not None:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    return body


def responses_body(
    question: str, instructions: str | None = "You are a careful assistant.", as_items: bool = False
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-4.1", "store": False}
    if as_items:
        body["input"] = [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Hi!"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]},
        ]
    else:
        body["input"] = question
    if instructions is not None:
        body["instructions"] = instructions
    return body


def chat_body(question: str) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": question},
        ],
    }
