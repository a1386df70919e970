"""RPCs of the contract whose capability a later piece of work builds.

They answer UNIMPLEMENTED with a message naming what is missing (501 through Envoy), so a
client can tell "not built" from "not found"; nothing fakes a result.
"""

from __future__ import annotations

from typing import Any

from memsvc.api.errors import UnimplementedError


def _not_built(rpc: str, capability: str):
    async def unary(self: Any, request: Any, context: Any) -> Any:
        raise UnimplementedError(f"{rpc} is not available in this build: {capability} is not implemented yet")

    unary.__name__ = rpc
    unary.__doc__ = f"Not built yet: {capability}."
    return unary


def _not_built_stream(rpc: str, capability: str):
    async def stream(self: Any, request: Any, context: Any) -> Any:
        raise UnimplementedError(f"{rpc} is not available in this build: {capability} is not implemented yet")
        yield  # pragma: no cover - makes this an async generator

    stream.__name__ = rpc
    stream.__doc__ = f"Not built yet: {capability}."
    return stream


def mark_pending(cls: type, pending: dict[str, str], streaming: frozenset[str] = frozenset()) -> type:
    """Class decorator helper: install a not-built method for each (rpc → capability)."""
    for rpc, capability in pending.items():
        if rpc in vars(cls):
            raise TypeError(f"{cls.__name__}.{rpc} is implemented; remove it from the pending list")
        factory = _not_built_stream if rpc in streaming else _not_built
        setattr(cls, rpc, factory(rpc, capability))
    return cls
