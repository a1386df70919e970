"""Recent-history messages exactly as the companion app stores them, for the character
tests through gRPC and through Envoy."""

from __future__ import annotations

from typing import Any


def message(role: str, text: str) -> dict[str, Any]:
    """A stored message exactly as the app lays it out (key order included)."""
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
