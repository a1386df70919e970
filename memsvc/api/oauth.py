"""The OAuth 2.1 resource-server side: JWT access tokens of one authorization server become
the same `Credential` the rule table (memsvc.api.access) already consults.

- Keys: the issuer's JWKS, found through its metadata (RFC 8414
  `/.well-known/oauth-authorization-server`, else OpenID Connect's
  `/.well-known/openid-configuration`) or MEMSVC_OAUTH_JWKS_URL, fetched through the outbound
  URL policy (memsvc.outbound), kept an hour, and fetched again when a token names a key id
  not in the set (key rotation), at most once per MEMSVC_OAUTH_JWKS_REFRESH_S. A key dropped
  from the set is gone with the next fetch.
- Tokens: asymmetric signatures only (RS*, PS*, ES*, EdDSA; never `none` or HS*, so a public
  key can never serve as an HMAC secret), `iss` exactly the issuer, `aud` containing the
  audience (RFC 8707), `exp` required and `nbf` honoured with LEEWAY_S of clock skew.
- Grants: the scopes `read:memory`, `write:memory` and `admin` are the permissions of the same
  names (others are ignored); the tenant claim (MEMSVC_OAUTH_TENANT_CLAIM, a string or a list,
  `*` for every apiKeyId) is the credential's tenants; `admin` reaches every tenant and the
  character memory, as a stored admin credential does. The credential is named `oauth:<sub>`
  in the audit log (a stored credential's id never holds ':').
- Metadata: RFC 9728 Protected Resource Metadata, and the `WWW-Authenticate` challenge that
  points to it (served by Envoy and the MCP HTTP server).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import jwt

from memsvc.config import Config
from memsvc.core.credentials import (
    ADMIN,
    ALL_TENANTS,
    MAX_TENANT_CHARS,
    MAX_TENANTS,
    PERMISSIONS,
    RESERVED_OWNER_PREFIX,
    Credential,
)
from memsvc.kernel.errors import UnavailableError
from memsvc.outbound import make_client

log = logging.getLogger("memsvc.oauth")

#: Asymmetric algorithms only: a verifier that took HS256 would take a token "signed" with
#: the issuer's public key as the HMAC secret.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_S = 30
KEYS_MAX_AGE_S = 3600.0
FETCH_TIMEOUT_S = 5.0
MAX_DOCUMENT_BYTES = 512 * 1024
MAX_SUBJECT_CHARS = 200
PRM_PATH = "/.well-known/oauth-protected-resource"

#: (url) → the JSON document at it; the seam of the two fetches (metadata, keys).
Fetch = Callable[[str], Any]


class TokenRefused(Exception):
    """A JWT that proves nothing; the message says why, without echoing the token."""


@dataclass(frozen=True)
class OAuthSettings:
    issuer: str
    audience: str
    tenant_claim: str = "memsvc_tenants"
    jwks_url: str | None = None
    refresh_s: float = 10.0

    @classmethod
    def from_config(cls, config: Config) -> OAuthSettings | None:
        if config.oauth_issuer is None or config.oauth_audience is None:
            return None
        return cls(
            config.oauth_issuer,
            config.oauth_audience,
            config.oauth_tenant_claim,
            config.oauth_jwks_url,
            config.oauth_jwks_refresh_s,
        )


def _well_known(url: str, name: str, inserted: bool) -> str:
    """RFC 8414's form inserts the well-known name between the host and the path; OpenID
    Connect's appends it to the issuer."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if inserted:
        return urlunsplit(parts._replace(path=f"/.well-known/{name}{path}", query="", fragment=""))
    return urlunsplit(parts._replace(path=f"{path}/.well-known/{name}", query="", fragment=""))


def metadata_url(resource: str) -> str:
    """Where RFC 9728 metadata of `resource` is served: the well-known name inserted between
    its host and its path."""
    return _well_known(resource, "oauth-protected-resource", inserted=True)


def protected_resource_metadata(settings: OAuthSettings) -> dict[str, Any]:
    """The RFC 9728 document: the resource is the audience a token must carry."""
    return {
        "resource": settings.audience,
        "authorization_servers": [settings.issuer],
        "scopes_supported": list(PERMISSIONS),
        "bearer_methods_supported": ["header"],
    }


def challenge(settings: OAuthSettings, path: str = "", invalid: bool = False) -> str:
    """The `WWW-Authenticate` value of a 401: where the metadata is (of the audience's origin
    with `path`, `/mcp` for the MCP endpoint), and `error="invalid_token"` when a token was
    sent and refused."""
    parts = urlsplit(settings.audience)
    url = urlunsplit((parts.scheme, parts.netloc, PRM_PATH + path, "", ""))
    error = 'error="invalid_token", ' if invalid else ""
    return f'Bearer {error}resource_metadata="{url}"'


def bearer_token(header: str | None) -> str | None:
    """The token of an `authorization: Bearer <token>` header, else None."""
    if not header or header[:7].lower() != "bearer ":
        return None
    return header[7:].strip()


def looks_like_jwt(token: str) -> bool:
    """A compact JWS: three base64url segments (a memsvc token `msk_...` never is)."""
    parts = token.split(".")
    return len(parts) == 3 and all(parts[:2]) and not token.startswith("msk_")


def http_fetch() -> Fetch:
    """The JSON at a URL, through the outbound URL policy (no redirects, no proxies)."""
    client = make_client(FETCH_TIMEOUT_S)

    def fetch(url: str) -> Any:
        response = client.get(url, headers={"accept": "application/json"})
        if response.status_code != 200:
            raise UnavailableError(f"the authorization server answered {response.status_code}")
        if len(response.content) > MAX_DOCUMENT_BYTES:
            raise UnavailableError("the authorization server's document is too large")
        return json.loads(response.content)

    return fetch


@dataclass(frozen=True)
class SigningKey:
    """A published key: the algorithm its JWK declares (None: any of its type) and the key."""

    alg: str | None
    key: Any


class Keys:
    """The issuer's signing keys by key id, fetched as the module docstring says."""

    def __init__(self, settings: OAuthSettings, fetch: Fetch):
        self._settings = settings
        self._fetch = fetch
        self._keys: dict[str, SigningKey] | None = None
        self._fetched_at = 0.0  # of the keys held
        self._tried_at: float | None = None  # of the last fetch, failed or not
        self._jwks_url = settings.jwks_url
        self._lock = threading.Lock()
        self.fetches = 0

    def key(self, kid: str | None) -> SigningKey | None:
        """The key a token names (blocking: may fetch). A token without `kid` is taken only
        when the set holds one key. Fetches, failed ones included, are at least `refresh_s`
        apart, so neither unknown key ids nor an unreachable issuer make one per request."""
        with self._lock:
            now = time.monotonic()
            due = self._tried_at is None or now - self._tried_at >= self._settings.refresh_s
            stale = self._keys is None or now - self._fetched_at >= KEYS_MAX_AGE_S
            unknown = self._keys is not None and kid is not None and kid not in self._keys
            if due and (stale or unknown):
                self._refresh(now)
            if self._keys is None:
                raise UnavailableError("the authorization server's keys could not be fetched")
            keys = self._keys
        if kid is None:
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    def _refresh(self, now: float) -> None:
        """Fetch the key set; on failure keep the keys held (if any) and log why."""
        self._tried_at = now
        try:
            url = self._jwks_url or self._discover()
            self._jwks_url = url
            document = self._fetch(url)
            self.fetches += 1
            self._keys = _signing_keys(document)
            self._fetched_at = now
        except (UnavailableError, httpx.HTTPError, ValueError, TypeError, KeyError) as exc:
            log.warning("oauth.keys_unavailable", extra={"error": type(exc).__name__})

    def _discover(self) -> str:
        """jwks_uri from the issuer's metadata, which must name the same issuer."""
        issuer = self._settings.issuer
        for url in (
            _well_known(issuer, "oauth-authorization-server", inserted=True),
            _well_known(issuer, "openid-configuration", inserted=False),
        ):
            try:
                document = self._fetch(url)
            except (UnavailableError, httpx.HTTPError, ValueError):
                continue
            if isinstance(document, dict) and document.get("issuer") == issuer and document.get("jwks_uri"):
                from memsvc.kernel.url_policy import check_url

                jwks_uri = str(document["jwks_uri"])
                if check_url(jwks_uri) is None:
                    return jwks_uri
        raise UnavailableError("the authorization server's metadata names no usable jwks_uri")


def _signing_keys(document: Any) -> dict[str, SigningKey]:
    keys: dict[str, SigningKey] = {}
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") == "oct":
            continue
        try:
            alg = entry.get("alg")
            keys[str(entry.get("kid", ""))] = SigningKey(alg if isinstance(alg, str) else None, jwt.PyJWK(entry).key)
        except jwt.PyJWTError:
            continue  # a key type this library cannot use
    return keys


class Verifier:
    """`verify(token)`: the credential a JWT access token proves, or TokenRefused."""

    def __init__(self, settings: OAuthSettings, fetch: Fetch | None = None):
        self.settings = settings
        self.keys = Keys(settings, fetch or http_fetch())

    def verify(self, token: str) -> Credential:
        """Blocking (the first call, and one naming an unknown key, fetch): a worker thread's."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused("not a JWT") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise TokenRefused(f"the signing algorithm {str(alg)[:16]!r} is not accepted")
        kid = header.get("kid")
        key = self.keys.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise TokenRefused("signed by a key the issuer does not publish")
        if key.alg is not None and key.alg != alg:
            raise TokenRefused("the token's algorithm is not its key's")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.settings.audience,
                issuer=self.settings.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("expired") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused("not issued for this resource (aud)") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused("not from the configured issuer (iss)") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused("not valid yet (nbf)") from None
        except (jwt.PyJWTError, ValueError, TypeError):
            raise TokenRefused("the signature or the claims do not verify") from None
        return self.credential(claims)

    def credential(self, claims: dict[str, Any]) -> Credential:
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise TokenRefused("no subject (sub)")
        scopes = _scopes(claims)
        permissions = frozenset(p for p in PERMISSIONS if p in scopes)
        name = f"oauth:{sub[:MAX_SUBJECT_CHARS]}"
        if ADMIN in permissions:
            return Credential(name, frozenset({ADMIN}), None, True)
        return Credential(name, permissions, _tenants(claims.get(self.settings.tenant_claim)), False)


def _scopes(claims: dict[str, Any]) -> set[str]:
    """RFC 9068's space-separated `scope`, or a list in `scope` or `scp`."""
    found: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            found.update(value.split())
        elif isinstance(value, list):
            found.update(v for v in value if isinstance(v, str))
    return found


def _tenants(value: Any) -> frozenset[str] | None:
    names = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    if len(names) > MAX_TENANTS or not all(isinstance(n, str) and 0 < len(n) <= MAX_TENANT_CHARS for n in names):
        raise TokenRefused("the tenant claim is malformed")
    if ALL_TENANTS in names:
        return None
    if any(n.startswith(RESERVED_OWNER_PREFIX) for n in names):
        raise TokenRefused("the tenant claim names a reserved apiKeyId")
    return frozenset(names)
