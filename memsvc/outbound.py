"""The one way memsvc opens a connection to an endpoint a setting names (remote embeddings,
rerank, a Qdrant server).

A URL checked against the policy (memsvc.kernel.url_policy) and then handed to an ordinary HTTP
client is resolved twice: once for the check, once by the client to connect. A name that
answers an allowed address first and a metadata address second (DNS rebinding) gets
through. Here the connection itself does the one resolution: httpcore calls
`PinnedBackend.connect_tcp(host, port)` for every new connection, which resolves `host`
once, refuses it when any address is forbidden, and connects to one of exactly those
addresses. The request still carries the host name — in the Host header and, for https, as
the TLS server name that the certificate is verified against — because httpcore takes both
from the URL, not from the socket.

The clients never follow redirects and ignore the environment (`trust_env=False`): no proxy
variables (a proxy would do its own resolution, outside the policy) and no `~/.netrc`
credentials attached to whatever host a setting points at.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from memsvc.kernel.inline import may_block
from memsvc.kernel.url_policy import Resolver, Unresolvable, URLRefused, checked_addresses

# httpx's own defaults (httpx.Limits of a plain Client).
_MAX_CONNECTIONS = 100
_KEEPALIVE = 20
_KEEPALIVE_EXPIRY_S = 5.0

__all__ = ["PinnedBackend", "URLRefused", "client_options", "make_client", "pinned_transport"]


class PinnedBackend(httpcore.NetworkBackend):
    """httpcore's network backend with the URL policy at connect time (see the module
    docstring). `resolver` is the DNS seam: (host, port) → addresses; the system's by
    default. It is called once per new connection, never again for that connection."""

    def __init__(self, resolver: Resolver | None = None):
        self._resolver = resolver
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = checked_addresses(host, port, self._resolver)
        except Unresolvable:
            raise httpcore.ConnectError("the host name does not resolve") from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # checked_addresses never returns an empty list
        raise failure

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("memsvc does not call endpoints over unix sockets")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def pinned_transport(resolver: Resolver | None = None, verify: ssl.SSLContext | None = None) -> httpx.HTTPTransport:
    """An httpx transport whose connections go through `PinnedBackend`. Certificates are
    verified against `verify` (a private CA), by default httpx's own trust store (never one
    named by SSL_CERT_FILE and the like: the environment is not consulted)."""
    transport = httpx.HTTPTransport(trust_env=False)
    # HTTPTransport takes no network backend; its pool is the one documented way to pass one
    # (httpcore.ConnectionPool(network_backend=...)), so the pool is replaced by an equal one
    # that has it. tests/unit/test_outbound.py fails if an httpx upgrade changes this seam.
    context = verify or httpx.create_ssl_context(trust_env=False)
    transport._pool = httpcore.ConnectionPool(
        ssl_context=context,
        max_connections=_MAX_CONNECTIONS,
        max_keepalive_connections=_KEEPALIVE,
        keepalive_expiry=_KEEPALIVE_EXPIRY_S,
        network_backend=PinnedBackend(resolver),
    )
    return transport


def _network_call(request: httpx.Request) -> None:
    """An inline call (memsvc.kernel.inline) never waits on the network: it moves to a worker."""
    may_block("a network call")


def client_options(resolver: Resolver | None = None) -> dict[str, Any]:
    """httpx.Client keyword arguments for a policy-checked client (also what qdrant-client
    passes through to its own httpx client)."""
    return {
        "transport": pinned_transport(resolver),
        "follow_redirects": False,
        "trust_env": False,
        "event_hooks": {"request": [_network_call]},
    }


def make_client(timeout_s: float, resolver: Resolver | None = None) -> httpx.Client:
    return httpx.Client(timeout=httpx.Timeout(timeout_s), headers={"User-Agent": "memsvc"}, **client_options(resolver))
