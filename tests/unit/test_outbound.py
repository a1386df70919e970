"""Outbound calls connect to the address the URL policy checked (no second DNS lookup, so no
DNS-rebinding window), keep the host name for the Host header and TLS, and turn every
failure of the call path into CallFailed. Against real loopback HTTP and HTTPS servers; the
resolver is the production seam `PinnedBackend` takes (its default asks the system)."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memsvc import outbound
from memsvc.embedding import _http
from tests.support.http_recorder import Recorder

NAME = "rebind.test"  # reserved TLD: never resolves for real, so only the seam can answer


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    with Recorder() as server:
        yield server


class Rebinding:
    """A resolver that answers the loopback address once and a metadata address afterwards:
    a DNS-rebinding attacker's name."""

    def __init__(self, first: list[str], then: list[str]):
        self.first, self.then = first, then
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        return list(self.first if len(self.lookups) == 1 else self.then)


def test_the_connection_goes_to_the_checked_address_and_dns_is_asked_once(recorder):
    resolver = Rebinding(["127.0.0.1"], ["169.254.169.254"])
    with _http.make_client(5, resolver) as client:
        for _ in range(3):
            answer = _http.post_json(client, f"http://{NAME}:{recorder.port}/v1/embeddings", {"input": ["a"]}, "k")
            assert answer == {}
    assert resolver.lookups == [NAME]  # one lookup: the one that was checked and connected to
    assert recorder.hosts == [f"{NAME}:{recorder.port}"] * 3  # the Host header keeps the name


def test_a_new_connection_after_rebinding_is_refused_before_any_request(recorder):
    resolver = Rebinding(["127.0.0.1"], ["169.254.169.254"])
    url = f"http://{NAME}:{recorder.port}/v1/embeddings"
    with _http.make_client(5, resolver) as client:
        _http.post_json(client, url, {}, None)
    with _http.make_client(5, resolver) as client, pytest.raises(_http.CallFailed) as info:
        _http.post_json(client, url, {}, None)
    assert info.value.refused == "resolves to a link-local or cloud metadata address"
    assert len(recorder.hosts) == 1


@pytest.mark.parametrize(
    "answer",
    [
        ["127.0.0.1", "169.254.169.254"],
        ["::ffff:169.254.169.254"],
        ["64:ff9b::a9fe:a9fe"],
        ["fd00:ec2::254"],
        ["100.100.100.200"],
    ],
)
def test_a_name_with_any_forbidden_address_is_refused(recorder, answer):
    with _http.make_client(5, lambda host, port: answer) as client, pytest.raises(_http.CallFailed) as info:
        _http.post_json(client, f"http://{NAME}:{recorder.port}/v1/embeddings", {}, None)
    assert info.value.refused and "metadata" in info.value.refused
    assert recorder.hosts == []


def test_the_checked_addresses_are_tried_in_order(recorder):
    """Nothing listens on 127.0.0.2 (the recorder binds 127.0.0.1): the connection moves on
    to the next address of the same, single, checked answer."""
    resolver = Rebinding(["127.0.0.2", "127.0.0.1"], ["169.254.169.254"])
    with _http.make_client(5, resolver) as client:
        assert _http.post_json(client, f"http://{NAME}:{recorder.port}/v1/embeddings", {}, None) == {}
    assert resolver.lookups == [NAME] and len(recorder.hosts) == 1


def test_a_name_that_does_not_resolve_is_a_connection_failure(recorder):
    def nothing(host, port):
        raise OSError("Name or service not known")

    with _http.make_client(5, nothing) as client, pytest.raises(_http.CallFailed, match="could not reach") as info:
        _http.post_json(client, f"http://{NAME}:{recorder.port}/v1/embeddings", {}, None)
    assert info.value.refused is None


def test_any_exception_in_the_call_path_is_a_call_failure(recorder):
    """Not only httpx.HTTPError: whatever the client stack raises ends as CallFailed, the one
    class every caller falls back on."""

    def broken(host, port):
        raise RuntimeError("resolver bug with a secret-token in its message")

    with _http.make_client(5, broken) as client, pytest.raises(_http.CallFailed) as info:
        _http.post_json(client, f"http://{NAME}:{recorder.port}/v1/embeddings", {}, "secret-token")
    assert "RuntimeError" in str(info.value) and "secret-token" not in str(info.value)


def test_proxy_variables_are_ignored(recorder, monkeypatch):
    with Recorder() as proxy:
        for name in ("ALL_PROXY", "HTTP_PROXY", "all_proxy", "http_proxy"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        with outbound.make_client(5) as client:
            assert client.get(f"http://127.0.0.1:{recorder.port}/readyz").status_code == 200
        assert proxy.hosts == [] and len(recorder.hosts) == 1


# ---- TLS: the certificate is checked against the name, the socket goes to the address ---------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            f"/CN={NAME}",
            "-addext",
            f"subjectAltName=DNS:{NAME}",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_verifies_the_host_name_while_connecting_to_the_pinned_address(certificate):
    cert, key = certificate
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    names: list[str | None] = []
    server_context.sni_callback = lambda sock, name, ctx: names.append(name)
    trust = ssl.create_default_context(cafile=str(cert))
    with Recorder(tls=server_context) as server:
        resolver = Rebinding(["127.0.0.1"], ["169.254.169.254"])
        transport = outbound.pinned_transport(resolver, verify=trust)
        with httpx.Client(transport=transport, trust_env=False) as client:
            assert client.get(f"https://{NAME}:{server.port}/").json() == {}
        assert names == [NAME] and resolver.lookups == [NAME]
        assert server.hosts == [f"{NAME}:{server.port}"]
        # The same certificate does not match the bare address: verification uses the name.
        with httpx.Client(transport=outbound.pinned_transport(verify=trust), trust_env=False) as client:
            with pytest.raises(httpx.ConnectError, match="certificate verify failed|match"):
                client.get(f"https://127.0.0.1:{server.port}/")
