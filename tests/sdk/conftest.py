"""A real memsvc server per test (the root conftest's `server` fixture: port 0, its own
event loop) with memory enabled, and SDK clients pointed at it."""

from __future__ import annotations

import ipaddress
import sys
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


# ---- no network --------------------------------------------------------------------------------

_reached: list[object] | None = None  # off-machine connections seen while a test holds `offline`


def _off_machine(host: object) -> bool:
    if host is None or (isinstance(host, bytes | bytearray) and not host):
        return False
    name = host.decode() if isinstance(host, bytes | bytearray) else str(host)
    if name == "localhost" or name.startswith("/"):  # a Unix socket path
        return False
    try:
        return not ipaddress.ip_address(name.split("%")[0]).is_loopback
    except ValueError:
        return True  # a name to look up: DNS is off the machine


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _reached is None:
        return
    if event == "socket.connect":
        address = args[1]
        if isinstance(address, tuple) and _off_machine(address[0]):
            _reached.append(address)
    elif event == "socket.getaddrinfo" and _off_machine(args[0]):
        _reached.append(args[0])


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Fails the test when anything in this process opens a connection off this machine or
    looks up a host name (Python's socket audit events; the gRPC core's own loopback traffic
    does not pass through them), with the Hugging Face hub switched to offline mode. The
    machine's network is closed except to package registries: a lazy download would fail or
    hang where a user has no network either."""
    global _reached
    if not getattr(_audit, "installed", False):
        sys.addaudithook(_audit)
        _audit.installed = True  # type: ignore[attr-defined]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _reached = []
    try:
        yield _reached
        assert _reached == [], f"tried to reach the network: {_reached}"
    finally:
        _reached = None
