"""The stored recent-history format (LangChain message dicts) and the snapshot tokens.

The companion app and its memory browser read these files byte for byte: the key order,
the 2-space indent, non-ASCII kept as is and no trailing newline are part of the contract,
and so is the fingerprint being the SHA-256 of exactly the text a GET returns.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def message_dict(role: str, text: str) -> dict[str, Any]:
    """One message as LangChain serializes it; roles are stored as given."""
    data: dict[str, Any] = {
        "content": text,
        "additional_kwargs": {},
        "response_metadata": {},
        "type": role,
        "name": None,
        "id": None,
        "example": False,
    }
    if role == "ai":
        data.update(tool_calls=[], invalid_tool_calls=[], usage_metadata=None)
    return {"type": role, "data": data}


def render(messages: list[Any]) -> str:
    return json.dumps(messages, indent=2, ensure_ascii=False)


def parse_messages(text: str | None) -> list[Any] | None:
    """The message list of a file's text; None when it is not a JSON list."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def fingerprint(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def path_key(path: Path) -> str:
    """The form of a path its generation is stored under."""
    return os.path.normcase(os.path.abspath(path))


def identity_token(path: Path, generation: int) -> str:
    raw = f"{path_key(path)}\0{generation}"
    return hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest()


def role_and_text(message: Any) -> tuple[str | None, str | None]:
    """(type, content) of a stored message, for matching a client's items to it."""
    if not isinstance(message, dict):
        return None, None
    data = message.get("data")
    role = message.get("type")
    content = data.get("content") if isinstance(data, dict) else None
    return (role if isinstance(role, str) else None), (content if isinstance(content, str) else None)


def is_theater_capsule(message: Any) -> bool:
    """A stored message whose additional_kwargs hold a `theater` object is read-only."""
    if not isinstance(message, dict) or not isinstance(message.get("data"), dict):
        return False
    kwargs = message["data"].get("additional_kwargs")
    return isinstance(kwargs, dict) and isinstance(kwargs.get("theater"), dict)
