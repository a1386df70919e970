"""A real memsvc server per test (the root conftest's `server` fixture: port 0, its own
event loop) with memory enabled, and SDK clients pointed at it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from conftest import ServerHandle
from memsvc_client import Memsvc

from tests.sdk.servers import address


@pytest.fixture
def owner() -> str:
    """An apiKeyId of the test's own."""
    return f"sdk-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def connect(server: ServerHandle) -> Iterator[Callable[..., Memsvc]]:
    """`connect(**kwargs)`: a Memsvc on the test's server (closed after the test)."""
    clients: list[Memsvc] = []

    def make(**kwargs: object) -> Memsvc:
        client = Memsvc(address(server), **kwargs)  # type: ignore[arg-type]
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def memsvc(connect: Callable[..., Memsvc], owner: str) -> Memsvc:
    """A client whose default apiKeyId is `owner`, on a server with memory enabled."""
    client = connect(api_key_id=owner)
    client.settings.update(enabled=True)
    return client
