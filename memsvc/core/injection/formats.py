"""Where memory goes in each provider's request body, and where the user's question is.

One handler per wire format, each a small class with the same three methods:

* `fits(body)`: the body can be read and written in this format (used when the provider named
  in the request implies the format);
* `recognised(body)`: the body carries evidence of this format (used when the provider does
  not say, or says something the body contradicts);
* `query(body)`: the text of the last user turn that has text (the retrieval query);
* `place(body, text, role, options)`: a new body with the memory text in it, and the role it
  went in as ("system" for a provider's system slot, "user" for a user turn).

Placement, per format (the memory goes first unless an option says otherwise):

| format | system role | user role (providers that reject system) | cache_safe |
| --- | --- | --- | --- |
| OpenAI chat `messages` | a `system` message before all messages | a `user` message before all | the memory message just before the last user message |
| OpenAI Responses `input` | prepended to `instructions` (set when absent) | a `user` input item before all | a message item just before the last user item |
| Anthropic Messages | prepended to top-level `system` (string, or a text block first in a block list) | a text block first in the first user message | a text block in the last user message |
| Gemini `generateContent` | a text part first in `systemInstruction` | a text part first in the first user content | a text part in the last user content |

`system_message_must_be_first` merges into the body's own system slot. In chat that is the
leading system message; the other three formats keep the system prompt outside the turn list,
so it is always first and the option changes nothing there. When both options are set,
`system_message_must_be_first` wins for a system-role injection (a provider constraint beats a
cache optimisation), as in chat.

Anthropic and Gemini never get a system role inside their turn lists (Anthropic's roles are
user/assistant, Gemini's user/model). Text merged into an existing user turn goes after any
leading tool/function results, which those APIs want first in the turn.

Nothing here mutates the input: only the containers on the path to the change are copied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

ROLE_SYSTEM = "system"
ROLE_USER = "user"

FORMAT_CHAT = "openai-chat"
FORMAT_RESPONSES = "openai-responses"
FORMAT_ANTHROPIC = "anthropic"
FORMAT_GEMINI = "gemini"


class Placement(Protocol):
    """What `place` needs from the injection options (memsvc.core.injection.inject.InjectOptions)."""

    @property
    def cache_safe(self) -> bool: ...

    @property
    def system_message_must_be_first(self) -> bool: ...


class BodyFormat(Protocol):
    name: str

    def fits(self, body: Mapping[str, Any]) -> bool: ...

    def recognised(self, body: Mapping[str, Any]) -> bool: ...

    def query(self, body: Mapping[str, Any]) -> str: ...

    def place(
        self, body: Mapping[str, Any], text: str, role: str, options: Placement
    ) -> tuple[dict[str, Any], str]: ...


# -- shared helpers ----------------------------------------------------------------------------


def _joined_text(content: Any, is_text: Callable[[dict[str, Any]], bool]) -> str:
    """A string content as is; a list of parts joined by newlines over the text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and is_text(p) and isinstance(p.get("text"), str)
        )
    return ""


def _last_index(items: list[Any], pred: Callable[[dict[str, Any]], bool]) -> int | None:
    for i in range(len(items) - 1, -1, -1):
        if isinstance(items[i], dict) and pred(items[i]):
            return i
    return None


def _first_index(items: list[Any], pred: Callable[[dict[str, Any]], bool]) -> int | None:
    for i, item in enumerate(items):
        if isinstance(item, dict) and pred(item):
            return i
    return None


def _last_text(items: Any, is_user: Callable[[dict[str, Any]], bool], text_of: Callable[[dict[str, Any]], str]) -> str:
    """The text of the last user turn that has any (a turn of only images or tool results
    says nothing to search with, so the one before it is used)."""
    if not isinstance(items, list):
        return ""
    for item in reversed(items):
        if isinstance(item, dict) and is_user(item):
            text = text_of(item)
            if text.strip():
                return text
    return ""


def _prefixed(text: str, original: str) -> str:
    """Memory text before the caller's own text, a blank line between (none when it is empty)."""
    return text + "\n\n" + original if original.strip() else text


def _with_part(parts: list[Any], part: dict[str, Any], leading: Callable[[Any], bool]) -> list[Any]:
    """`parts` with `part` inserted after the leading parts that must stay first."""
    index = 0
    while index < len(parts) and leading(parts[index]):
        index += 1
    return [*parts[:index], part, *parts[index:]]


def _replaced(items: list[Any], index: int, item: Any) -> list[Any]:
    return [*items[:index], item, *items[index + 1 :]]


def _is_role(role: str) -> Callable[[dict[str, Any]], bool]:
    return lambda item: item.get("role") == role


def _has_text(_part: dict[str, Any]) -> bool:
    return True


def _typed(*types: str) -> Callable[[dict[str, Any]], bool]:
    return lambda part: part.get("type") in types


# -- OpenAI chat completions -------------------------------------------------------------------


class OpenAIChat:
    """`{"messages": [{"role", "content"}]}`: the memory is a message of its own."""

    name = FORMAT_CHAT

    def fits(self, body: Mapping[str, Any]) -> bool:
        return isinstance(body.get("messages"), list)

    recognised = fits

    def query(self, body: Mapping[str, Any]) -> str:
        return _last_text(
            body.get("messages"), _is_role(ROLE_USER), lambda m: _joined_text(m.get("content"), _has_text)
        )

    def place(self, body: Mapping[str, Any], text: str, role: str, options: Placement) -> tuple[dict[str, Any], str]:
        messages: list[Any] = body["messages"]
        return {**body, "messages": self._placed(messages, text, role, options)}, role

    def _placed(self, messages: list[Any], text: str, role: str, options: Placement) -> list[Any]:
        if role == ROLE_SYSTEM and options.system_message_must_be_first:
            merged = self._merge_into_first_system(messages, text)
            if merged is not None:
                return merged
            return [{"role": role, "content": text}, *messages]
        index = _last_index(messages, _is_role(ROLE_USER)) if options.cache_safe else None
        result = list(messages)
        result.insert(0 if index is None else index, {"role": role, "content": text})
        return result

    @staticmethod
    def _merge_into_first_system(messages: list[Any], text: str) -> list[Any] | None:
        """Merge into messages[0] when it is a system message with string or content-part-list
        content (copying that one message); None when there is nothing to merge into."""
        if not messages or not isinstance(messages[0], dict) or messages[0].get("role") != ROLE_SYSTEM:
            return None
        first = messages[0]
        content = first.get("content")
        if isinstance(content, str):
            new_content: Any = text + "\n\n" + content
        elif isinstance(content, list):
            new_content = [{"type": "text", "text": text}, *content]
        else:
            return None
        return [{**first, "content": new_content}, *messages[1:]]


# -- OpenAI Responses --------------------------------------------------------------------------


def _responses_user(item: dict[str, Any]) -> bool:
    """A user message item (`type` is "message" or left out; tool outputs have other types)."""
    return item.get("role") == ROLE_USER and item.get("type", "message") == "message"


class OpenAIResponses:
    """`{"instructions": str, "input": str | [items]}`: the system slot is `instructions`."""

    name = FORMAT_RESPONSES

    def fits(self, body: Mapping[str, Any]) -> bool:
        if "messages" in body or "contents" in body:
            return False
        return isinstance(body.get("input"), (str, list)) or isinstance(body.get("instructions"), str)

    recognised = fits

    def query(self, body: Mapping[str, Any]) -> str:
        value = body.get("input")
        if isinstance(value, str):
            return value
        return _last_text(
            value, _responses_user, lambda m: _joined_text(m.get("content"), _typed("input_text", "text"))
        )

    def place(self, body: Mapping[str, Any], text: str, role: str, options: Placement) -> tuple[dict[str, Any], str]:
        instructions = body.get("instructions")
        to_instructions = options.system_message_must_be_first or not options.cache_safe
        if role == ROLE_SYSTEM and to_instructions and (instructions is None or isinstance(instructions, str)):
            return {**body, "instructions": _prefixed(text, instructions or "")}, role
        items = self._items(body.get("input"))
        index = _last_index(items, _responses_user) if options.cache_safe else None
        items.insert(0 if index is None else index, {"role": role, "content": text})
        return {**body, "input": items}, role

    @staticmethod
    def _items(value: Any) -> list[Any]:
        """The input as a new item list: a string input is one user message."""
        if isinstance(value, str):
            return [{"role": ROLE_USER, "content": value}]
        return list(value) if isinstance(value, list) else []


# -- turn lists with a separate system slot (Anthropic, Gemini) --------------------------------


class _TurnsWithSystemSlot:
    """Shared placement for formats whose system prompt lives outside the turn list."""

    turns_key = ""

    def _is_user(self, turn: dict[str, Any]) -> bool:
        raise NotImplementedError

    def _with_text(self, turn: dict[str, Any], text: str) -> dict[str, Any]:
        raise NotImplementedError

    def _new_user_turn(self, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def _system_merged(self, body: Mapping[str, Any], text: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def place(self, body: Mapping[str, Any], text: str, role: str, options: Placement) -> tuple[dict[str, Any], str]:
        to_system = options.system_message_must_be_first or not options.cache_safe
        if role == ROLE_SYSTEM and to_system:
            merged = self._system_merged(body, text)
            if merged is not None:
                return merged, ROLE_SYSTEM
        turns: list[Any] = body[self.turns_key]
        find = _last_index if options.cache_safe else _first_index
        index = find(turns, self._is_user)
        if index is None:
            if role == ROLE_SYSTEM:
                merged = self._system_merged(body, text)
                if merged is not None:
                    return merged, ROLE_SYSTEM
            return {**body, self.turns_key: [self._new_user_turn(text), *turns]}, ROLE_USER
        return {**body, self.turns_key: _replaced(turns, index, self._with_text(turns[index], text))}, ROLE_USER


# -- Anthropic Messages ------------------------------------------------------------------------

ANTHROPIC_ONLY_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "document"})
"""Content block types that exist in Anthropic's Messages API and not in OpenAI chat."""

ANTHROPIC_ONLY_FIELDS = frozenset({"system", "anthropic_version", "stop_sequences", "top_k", "thinking"})
"""Top-level fields of Anthropic's Messages API that OpenAI chat does not have. Without one of
them (or an Anthropic-only block) an Anthropic body looks exactly like an OpenAI chat body, and
only the provider can tell them apart."""


def _anthropic_roles_only(messages: list[Any]) -> bool:
    return all(not isinstance(m, dict) or m.get("role") not in (ROLE_SYSTEM, "developer", "tool") for m in messages)


def _has_anthropic_block(messages: list[Any]) -> bool:
    return any(
        isinstance(m, dict)
        and isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") in ANTHROPIC_ONLY_BLOCKS for b in m["content"])
        for m in messages
    )


class AnthropicMessages(_TurnsWithSystemSlot):
    """`{"system": str | [text blocks], "messages": [{"role": user|assistant, ...}]}`."""

    name = FORMAT_ANTHROPIC
    turns_key = "messages"

    def fits(self, body: Mapping[str, Any]) -> bool:
        messages = body.get("messages")
        return isinstance(messages, list) and _anthropic_roles_only(messages)

    def recognised(self, body: Mapping[str, Any]) -> bool:
        if not self.fits(body):
            return False
        return any(k in body for k in ANTHROPIC_ONLY_FIELDS) or _has_anthropic_block(body["messages"])

    def query(self, body: Mapping[str, Any]) -> str:
        return _last_text(body.get("messages"), self._is_user, lambda m: _joined_text(m.get("content"), _typed("text")))

    def _is_user(self, turn: dict[str, Any]) -> bool:
        return turn.get("role") == ROLE_USER

    def _with_text(self, turn: dict[str, Any], text: str) -> dict[str, Any]:
        block = {"type": "text", "text": text}
        content = turn.get("content")
        if isinstance(content, list):
            return {**turn, "content": _with_part(content, block, _is_tool_result)}
        if isinstance(content, str) and content:
            return {**turn, "content": [block, {"type": "text", "text": content}]}
        return {**turn, "content": [block]}

    def _new_user_turn(self, text: str) -> dict[str, Any]:
        return {"role": ROLE_USER, "content": [{"type": "text", "text": text}]}

    def _system_merged(self, body: Mapping[str, Any], text: str) -> dict[str, Any] | None:
        system = body.get("system")
        if system is None or isinstance(system, str):
            return {**body, "system": _prefixed(text, system or "")}
        if isinstance(system, list):
            return {**body, "system": [{"type": "text", "text": text}, *system]}
        return None


def _is_tool_result(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "tool_result"


# -- Gemini generateContent --------------------------------------------------------------------

GEMINI_SYSTEM_KEYS = ("systemInstruction", "system_instruction")
"""The REST API takes the proto JSON name and, like every proto JSON parser, the field name."""


def _is_function_response(part: Any) -> bool:
    return isinstance(part, dict) and ("functionResponse" in part or "function_response" in part)


class GeminiGenerateContent(_TurnsWithSystemSlot):
    """`{"systemInstruction": {"parts": [{"text"}]}, "contents": [{"role": user|model, "parts"}]}`."""

    name = FORMAT_GEMINI
    turns_key = "contents"

    def fits(self, body: Mapping[str, Any]) -> bool:
        return isinstance(body.get("contents"), list) and "messages" not in body

    recognised = fits

    def query(self, body: Mapping[str, Any]) -> str:
        return _last_text(body.get("contents"), self._is_user, lambda c: _joined_text(c.get("parts"), _has_text))

    def _is_user(self, turn: dict[str, Any]) -> bool:
        """A content without a role is the user's (the API allows leaving it unset)."""
        return bool(turn.get("role", ROLE_USER) == ROLE_USER)

    def _with_text(self, turn: dict[str, Any], text: str) -> dict[str, Any]:
        parts = turn.get("parts")
        parts = parts if isinstance(parts, list) else []
        return {**turn, "parts": _with_part(parts, {"text": text}, _is_function_response)}

    def _new_user_turn(self, text: str) -> dict[str, Any]:
        return {"role": ROLE_USER, "parts": [{"text": text}]}

    def _system_merged(self, body: Mapping[str, Any], text: str) -> dict[str, Any] | None:
        key = next((k for k in GEMINI_SYSTEM_KEYS if k in body), GEMINI_SYSTEM_KEYS[0])
        system = body.get(key)
        if system is None:
            return {**body, key: {"parts": [{"text": text}]}}
        if isinstance(system, str):
            return {**body, key: {"parts": [{"text": text}, *([{"text": system}] if system else [])]}}
        if isinstance(system, dict) and isinstance(system.get("parts", []), list):
            return {**body, key: {**system, "parts": [{"text": text}, *system.get("parts", [])]}}
        return None


# -- choosing the format -----------------------------------------------------------------------

CHAT, RESPONSES, ANTHROPIC, GEMINI = OpenAIChat(), OpenAIResponses(), AnthropicMessages(), GeminiGenerateContent()

SHAPE_ORDER: tuple[BodyFormat, ...] = (GEMINI, RESPONSES, ANTHROPIC, CHAT)
"""Recognition order when the provider does not decide: the most specific evidence first
(`contents`; `input`/`instructions` without messages; a top-level `system` or Anthropic-only
blocks next to messages), plain `messages` last."""

PROVIDER_FORMATS: dict[str, tuple[BodyFormat, ...]] = {
    "anthropic": (ANTHROPIC,),
    "claude": (ANTHROPIC,),
    "gemini": (GEMINI,),
    "google": (GEMINI,),
    "google-ai-studio": (GEMINI,),
    "vertex": (GEMINI,),
    "vertex-ai": (GEMINI,),
    "openai": (CHAT, RESPONSES),
    "azure": (CHAT, RESPONSES),
    "azure-openai": (CHAT, RESPONSES),
}
"""Providers whose native API implies the format. OpenAI serves chat and Responses, so its
body's shape picks between them."""


def detect(body: Any, provider: Any = "") -> BodyFormat | None:
    """The provider's own format when the body fits it; otherwise the format the body's
    shape shows (a gateway may send, say, an OpenAI-style body to an Anthropic route and
    translate it later); None when the body is no chat request at all."""
    if not isinstance(body, Mapping):
        return None
    name = provider.strip().lower() if isinstance(provider, str) else ""
    for fmt in PROVIDER_FORMATS.get(name, ()):
        if fmt.fits(body):
            return fmt
    return next((fmt for fmt in SHAPE_ORDER if fmt.recognised(body)), None)
