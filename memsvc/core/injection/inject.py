"""Memory injection: putting retrieved memories into a chat request body.

Pure functions over provider request bodies: OpenAI chat completions (`messages`), OpenAI
Responses (`instructions`/`input`), Anthropic Messages (top-level `system`) and Gemini
`generateContent` (`systemInstruction`/`contents`); the format handlers live in
memsvc.core.injection.formats. No grpc, no SQL, no I/O, so the RPC layer, the MCP tools and
tests can all share them.

Invariants, because callers forward the result straight to an LLM provider:

* No usable memories -> the caller's body object itself comes back (`is`), nothing added, so a
  no-op costs nothing and cannot change what the provider sees.
* The input body is never mutated, at any depth: only the containers on the path to the
  change (the turn list, the one turn or system slot merged into) are copied; everything
  else is shared read-only with the input.
* Malformed bodies never raise: a gateway must not fail a chat request over memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memsvc.core.injection.formats import ROLE_SYSTEM, ROLE_USER, BodyFormat, detect

NO_MEMORY_HEADERS = ("x-omniroute-no-memory", "x-memsvc-no-memory")
"""Per-request opt-out headers: the reference's name and our own alias."""

NO_MEMORY_TRUE_VALUES = frozenset({"true", "1", "yes"})

MEMORY_TEXT_PREFIX = "Memory context: "

PROVIDERS_WITHOUT_SYSTEM_MESSAGE = frozenset({"o1", "o1-mini", "o1-preview", "glm", "glmt", "glm-cn", "zai", "qianfan"})
"""Providers (or exact model ids) that answer 400 to a `system` role (reference issue #1701)."""

MODEL_PREFIXES_WITHOUT_SYSTEM_MESSAGE = ("glm-", "ernie-")
"""GLM/Zhipu and Baidu ERNIE model families reject `system` whatever provider routes them."""


@dataclass(frozen=True)
class InjectOptions:
    """Placement options. `cache_safe` keeps the provider's prompt-cache prefix
    stable (the memory goes into or just before the last user turn instead of first);
    `system_message_must_be_first` serves providers that want a single leading system
    message (merged into the body's own system slot). When both apply to a system-role
    injection, `system_message_must_be_first` wins: it is a hard provider constraint, cache
    friendliness is only an optimisation."""

    cache_safe: bool = False
    system_message_must_be_first: bool = False


@dataclass(frozen=True)
class Injection:
    """Outcome of `inject`. `body` is the input object itself when `injected` is False."""

    body: Mapping[str, Any]  # the (new) request body
    injected: bool
    role: str | None  # "system" (the format's system slot) | "user" (a user turn) | None
    text: str | None  # the memory text
    format: str | None = None  # openai-chat | openai-responses | anthropic | gemini


# -- opt-out -----------------------------------------------------------------------------------


def no_memory_requested(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> bool:
    """True when any opt-out header says true/1/yes. Names and values are compared
    case-insensitively and values are trimmed, because HTTP/gRPC metadata normalisation varies
    by hop. Also accepts gRPC-style sequences of (key, value) pairs; anything else is False."""
    for name, value in _header_pairs(headers):
        if not isinstance(name, str) or not isinstance(value, str):
            continue
        if name.strip().lower() in NO_MEMORY_HEADERS and _is_truthy(value):
            return True
    return False


def _header_pairs(headers: Any) -> list[tuple[Any, Any]]:
    """Normalise a mapping or an iterable of pairs to pairs; garbage yields nothing."""
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return list(headers.items())
    try:
        return [tuple(p) for p in headers if isinstance(p, (tuple, list)) and len(p) == 2]
    except TypeError:
        return []


def _is_truthy(value: str) -> bool:
    """The reference accepts exactly true|1|yes; anything else (false, 0, "") keeps memory on."""
    return value.strip().lower() in NO_MEMORY_TRUE_VALUES


# -- text and role -----------------------------------------------------------------------------


def memory_text(contents: Sequence[str]) -> str | None:
    """`"Memory context: " + "\\n".join(trimmed non-empty contents)`, or None when nothing is
    left after trimming, so that blank memories never cost a message. Non-strings are skipped
    rather than raised on: injection must not break a chat request."""
    lines = [c.strip() for c in contents if isinstance(c, str) and c.strip()]
    if not lines:
        return None
    return MEMORY_TEXT_PREFIX + "\n".join(lines)


def role_for(provider: str, model: str = "") -> str:
    """ "user" for providers/models that reject the system role, else "system" (unknown
    providers included: the system role is the reference's safe default)."""
    return ROLE_SYSTEM if _supports_system_role(provider, model) else ROLE_USER


def _supports_system_role(provider: str, model: str) -> bool:
    """Checks the provider name, then the bare model id (after the last "/", so routed ids
    like "openai/o1-mini" or "z-ai/glm-4.7" are recognised)."""
    if _norm(provider) in PROVIDERS_WITHOUT_SYSTEM_MESSAGE:
        return False
    bare_model = _norm(model).rsplit("/", 1)[-1]
    if bare_model in PROVIDERS_WITHOUT_SYSTEM_MESSAGE:
        return False
    return not bare_model.startswith(MODEL_PREFIXES_WITHOUT_SYSTEM_MESSAGE)


def _norm(name: Any) -> str:
    """Lower-cased, trimmed name; non-strings count as empty (never raise)."""
    return name.strip().lower() if isinstance(name, str) else ""


# -- injection ---------------------------------------------------------------------------------


def inject(
    body: Mapping[str, Any],
    contents: Sequence[str],
    provider: str,
    model: str = "",
    options: InjectOptions = InjectOptions(),
) -> Injection:
    """Add the memory text to a chat request body, in the body's own format, without
    mutating it (see memsvc.core.injection.formats for where it goes in each format).

    When `model` is empty the body's own string `model` field is used for the role decision,
    so callers that only know the provider still route GLM/ERNIE models correctly."""
    text = memory_text(contents)
    fmt = detect_format(body, provider)
    if text is None or fmt is None:
        return Injection(body=body, injected=False, role=None, text=None)
    role = role_for(provider, model or _body_model(body))
    new_body, placed_role = fmt.place(body, text, role, options)
    return Injection(body=new_body, injected=True, role=placed_role, text=text, format=fmt.name)


def detect_format(body: Any, provider: Any = "") -> BodyFormat | None:
    """The body's wire format: the provider's when the body fits it, else the one its shape
    shows; None when the body is no chat request (nothing to inject into)."""
    return detect(body, provider)


def _body_model(body: Mapping[str, Any]) -> str:
    """The body's model id if it is a string, else ""."""
    model = body.get("model")
    return model if isinstance(model, str) else ""


def last_user_text(body: Mapping[str, Any], provider: str = "") -> str:
    """The text of the last user turn that has text, in the body's format: the retrieval
    query for this request. Content may be a string or a list of parts; non-text parts
    (images, tool results) are ignored. Anything malformed gives ""."""
    fmt = detect_format(body, provider)
    return fmt.query(body) if fmt is not None else ""
