"""JWT access-token validation (memsvc.api.oauth) against a real authorization server on
loopback (tests/support/oauth_server.py, authlib): discovery, keys, every refusal, rotation
and the rate limit on key fetches, and the claims-to-credential mapping."""

from __future__ import annotations

import time

import pytest
from support.oauth_server import OAuthServer

from memsvc.api.oauth import (
    OAuthSettings,
    TokenRefused,
    Verifier,
    challenge,
    looks_like_jwt,
    metadata_url,
    protected_resource_metadata,
)
from memsvc.config import ConfigError, load
from memsvc.kernel.errors import UnavailableError

AUDIENCE = "http://127.0.0.1:8080"


@pytest.fixture(scope="module", params=["RS256", "ES256"])
def server(request):
    running = OAuthServer.start(request.param)
    yield running
    running.stop()


def _verifier(server: OAuthServer, refresh_s: float = 0.0, **kw) -> Verifier:
    return Verifier(OAuthSettings(server.issuer, AUDIENCE, refresh_s=refresh_s, **kw))


def test_a_valid_token_becomes_a_credential_within_its_scopes_and_tenants(server):
    credential = _verifier(server).verify(server.sign(server.claims(AUDIENCE, "read:memory", ["alice", "bob"])))
    assert credential.id == "oauth:alice"
    assert credential.permissions == {"read:memory"}
    assert credential.tenants == {"alice", "bob"} and not credential.characters
    both = _verifier(server).verify(server.sign(server.claims(AUDIENCE, "read:memory write:memory foo", "alice")))
    assert both.permissions == {"read:memory", "write:memory"} and both.tenants == {"alice"}
    every = _verifier(server).verify(server.sign(server.claims(AUDIENCE, "write:memory", "*")))
    assert every.tenants is None
    admin = _verifier(server).verify(server.sign(server.claims(AUDIENCE, "admin", [])))
    assert admin.is_admin and admin.tenants is None and admin.characters
    nothing = _verifier(server).verify(server.sign(server.claims(AUDIENCE, "profile", ["alice"])))
    assert nothing.permissions == frozenset()


def test_the_audience_may_be_one_of_several(server):
    token = server.sign(server.claims(["http://other.example", AUDIENCE], "read:memory"))
    assert _verifier(server).verify(token).permissions == {"read:memory"}


def test_a_custom_tenant_claim(server):
    token = server.sign(server.claims(AUDIENCE, "read:memory", [], org=["acme"]))
    assert _verifier(server, tenant_claim="org").verify(token).tenants == {"acme"}


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda s: s.sign(s.claims(AUDIENCE, "read:memory", exp=int(time.time()) - 120)), "expired"),
        (lambda s: s.sign(s.claims("http://127.0.0.1:9999", "read:memory")), "aud"),
        (lambda s: s.sign(s.claims(AUDIENCE, "read:memory", iss="http://127.0.0.1:1")), "iss"),
        (lambda s: s.sign(s.claims(AUDIENCE, "read:memory", nbf=int(time.time()) + 600)), "nbf"),
        (lambda s: s.unsigned(s.claims(AUDIENCE, "admin")), "'none' is not accepted"),
        (lambda s: s.hs256_with_public_key(s.claims(AUDIENCE, "admin")), "'HS256' is not accepted"),
        (lambda s: s.sign({k: v for k, v in s.claims(AUDIENCE, "admin").items() if k != "exp"}), "do not verify"),
        (lambda s: s.sign(s.claims(AUDIENCE, "read:memory", ["__memsvc_x"])), "reserved"),
        (lambda s: s.sign(s.claims(AUDIENCE, "read:memory", [1, 2])), "malformed"),
        (lambda s: s.sign(s.claims(AUDIENCE, "admin"))[:-6] + "AAAAAA", "do not verify"),
    ],
    ids=[
        "expired",
        "wrong-audience",
        "wrong-issuer",
        "not-yet",
        "alg-none",
        "hs256-public-key",
        "no-exp",
        "reserved-tenant",
        "bad-tenant-claim",
        "bad-signature",
    ],
)
def test_refused_tokens(server, make, reason):
    with pytest.raises(TokenRefused, match=reason):
        _verifier(server).verify(make(server))


def test_a_key_from_elsewhere_is_refused(server):
    other = OAuthServer.start(server.alg)
    try:
        forged = other.sign(server.claims(AUDIENCE, "admin"))  # same claims, the other server's key
        with pytest.raises(TokenRefused, match="does not publish"):
            _verifier(server).verify(forged)
    finally:
        other.stop()


def test_rotation_refetches_keys_and_a_dropped_key_is_refused():
    server = OAuthServer.start()
    try:
        verifier = _verifier(server)
        old = server.current
        old_token = server.sign(server.claims(AUDIENCE, "read:memory"))
        assert verifier.verify(old_token).id == "oauth:alice"
        fetches = verifier.keys.fetches
        server.rotate()
        new_token = server.sign(server.claims(AUDIENCE, "read:memory"))
        assert verifier.verify(new_token).id == "oauth:alice"  # an unknown kid: fetched again
        assert verifier.keys.fetches == fetches + 1
        assert verifier.verify(old_token).id == "oauth:alice"  # both published, no fetch
        server.drop(str(old.kid))
        server.rotate()
        newer = server.sign(server.claims(AUDIENCE, "read:memory"))
        assert verifier.verify(newer).id == "oauth:alice"
        with pytest.raises(TokenRefused, match="does not publish"):
            verifier.verify(old_token)
    finally:
        server.stop()


def test_unknown_keys_fetch_at_most_once_per_interval():
    server = OAuthServer.start()
    try:
        verifier = _verifier(server, refresh_s=3600)
        verifier.verify(server.sign(server.claims(AUDIENCE, "read:memory")))
        fetches = verifier.keys.fetches
        server.rotate()
        for _ in range(5):  # a flood of tokens naming new kids costs no fetch
            with pytest.raises(TokenRefused, match="does not publish"):
                verifier.verify(server.sign(server.claims(AUDIENCE, "read:memory")))
        assert verifier.keys.fetches == fetches
    finally:
        server.stop()


def test_an_issuer_that_is_not_there_is_unavailable_and_not_asked_per_request():
    server = OAuthServer.start()
    server.down = True
    verifier = _verifier(server, refresh_s=3600)
    try:
        for _ in range(3):
            with pytest.raises(UnavailableError):
                verifier.verify(server.sign(server.claims(AUDIENCE, "read:memory")))
        assert len(server.requests) == 2  # one discovery (both well-known paths), not one per token
    finally:
        server.stop()


def test_an_unreachable_issuer_port_is_unavailable():
    server = OAuthServer.start()
    try:
        with pytest.raises(UnavailableError):
            Verifier(OAuthSettings("http://127.0.0.1:9", AUDIENCE)).verify(
                server.sign(server.claims(AUDIENCE, "read:memory"))
            )
    finally:
        server.stop()


def test_the_jwks_url_override_skips_discovery(server):
    verifier = Verifier(OAuthSettings(server.issuer, AUDIENCE, jwks_url=f"{server.issuer}/jwks"))
    before = server.requests.count("/.well-known/oauth-authorization-server")
    verifier.verify(server.sign(server.claims(AUDIENCE, "read:memory")))
    assert server.requests.count("/.well-known/oauth-authorization-server") == before


def test_openid_configuration_is_the_fallback():
    server = OAuthServer.start(oidc_only=True)
    try:
        assert _verifier(server).verify(server.sign(server.claims(AUDIENCE, "read:memory"))).id == "oauth:alice"
        assert server.requests[:2] == ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]
    finally:
        server.stop()


def test_well_known_urls_of_an_issuer_with_a_path():
    from memsvc.api.oauth import _well_known

    issuer = "https://idp.example/realms/memsvc"
    assert _well_known(issuer, "oauth-authorization-server", inserted=True) == (
        "https://idp.example/.well-known/oauth-authorization-server/realms/memsvc"
    )
    assert _well_known(issuer, "openid-configuration", inserted=False) == (
        "https://idp.example/realms/memsvc/.well-known/openid-configuration"
    )


def test_metadata_and_challenge():
    settings = OAuthSettings("https://idp.example", "https://memsvc.example")
    assert protected_resource_metadata(settings) == {
        "resource": "https://memsvc.example",
        "authorization_servers": ["https://idp.example"],
        "scopes_supported": ["read:memory", "write:memory", "admin"],
        "bearer_methods_supported": ["header"],
    }
    assert (
        metadata_url("https://memsvc.example/mcp") == "https://memsvc.example/.well-known/oauth-protected-resource/mcp"
    )
    assert challenge(settings, "/mcp") == (
        'Bearer resource_metadata="https://memsvc.example/.well-known/oauth-protected-resource/mcp"'
    )
    assert challenge(settings, invalid=True) == (
        'Bearer error="invalid_token", resource_metadata="https://memsvc.example/.well-known/oauth-protected-resource"'
    )
    assert looks_like_jwt("a.b.c") and not looks_like_jwt("msk_0123_abc") and not looks_like_jwt("plain")


@pytest.mark.parametrize(
    "env, message",
    [
        ({"MEMSVC_OAUTH_ISSUER": "http://127.0.0.1:1"}, "needs MEMSVC_OAUTH_AUDIENCE"),
        ({"MEMSVC_OAUTH_AUDIENCE": "http://127.0.0.1:8080"}, "need MEMSVC_OAUTH_ISSUER"),
        ({"MEMSVC_OAUTH_ISSUER": "http://169.254.169.254", "MEMSVC_OAUTH_AUDIENCE": AUDIENCE}, "metadata"),
        ({"MEMSVC_OAUTH_ISSUER": "http://127.0.0.1:1", "MEMSVC_OAUTH_AUDIENCE": "memsvc"}, "http"),
    ],
)
def test_configuration_is_checked(env, message):
    with pytest.raises(ConfigError, match=message):
        load(env=env).validate()


def test_oauth_alone_allows_a_public_bind():
    env = {
        "MEMSVC_OAUTH_ISSUER": "https://idp.example",
        "MEMSVC_OAUTH_AUDIENCE": "https://m.example",
        "MEMSVC_GRPC_HOST": "0.0.0.0",
        "MEMSVC_REST_HOST": "0.0.0.0",
    }
    config = load(env=env)
    config.validate()
    assert config.auth_enabled
