"""A real OAuth 2.1 authorization server on loopback, built on authlib (its RFC 6749
AuthorizationServer with the authorization-code grant and PKCE, RFC 7636) over the standard
library's HTTP server:

- `/.well-known/oauth-authorization-server` (RFC 8414) and `/jwks` (its public keys);
- `/authorize`: consents at once for the one user (an agent's browser would show a page) and
  redirects to the client's redirect URI with the code;
- `/token`: the code (with its S256 verifier) for a JWT access token (RS256 or ES256, signed
  by the current key, `kid` in the header) whose `aud` is the `resource` parameter (RFC 8707),
  with the granted scopes and the tenant claim.

`sign(claims)` issues a token directly (for the refusal tests); `rotate()` adds a new key and
signs with it, `drop(kid)` stops publishing a key. Nothing here is memsvc's code.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from authlib.oauth2.rfc6749 import AuthorizationServer, ClientMixin, OAuth2Payload, OAuth2Request, grants
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7636 import CodeChallenge
from joserfc import jwt as jose_jwt
from joserfc.jwk import ECKey, KeySet, RSAKey

TENANT_CLAIM = "memsvc_tenants"


@dataclass
class Client(ClientMixin):
    client_id: str
    redirect_uris: list[str]
    scope: str = "read:memory write:memory admin"

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        allowed = set(self.scope.split())
        return " ".join(s for s in (scope or "").split() if s in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return False  # a public client (PKCE instead of a secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "authorization_code"


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    resource: str
    code_challenge: str
    code_challenge_method: str

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class User:
    sub: str
    tenants: list[str] = field(default_factory=list)

    def get_user_id(self) -> str:
        return self.sub


class _Payload(OAuth2Payload):
    def __init__(self, values: dict[str, str]):
        self._values = values

    @property
    def data(self) -> dict[str, str]:
        return self._values

    @property
    def datalist(self) -> Any:
        return {k: [v] for k, v in self._values.items()}


class _Request(OAuth2Request):
    def __init__(self, method: str, uri: str, headers: dict[str, str], query: dict[str, str], form: dict[str, str]):
        super().__init__(method, uri, headers=headers)
        self._query, self._form = query, form
        self.payload = _Payload({**query, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._query

    @property
    def form(self) -> dict[str, str]:
        return self._form


class _Server(AuthorizationServer):
    def __init__(self, owner: OAuthServer):
        super().__init__(scopes_supported=["read:memory", "write:memory", "admin"])
        self.owner = owner

    def query_client(self, client_id: str) -> Client | None:
        return self.owner.clients.get(client_id)

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        self.owner.issued.append(token)

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        return request

    def handle_response(self, status: int, body: Any, headers: Any) -> tuple[int, Any, Any]:
        return status, body, headers

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass


class _CodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["none"]

    def save_authorization_code(self, code: str, request: Any) -> None:
        data = request.payload.data
        owner: OAuthServer = self.server.owner  # type: ignore[attr-defined]
        owner.challenge_methods.append(data.get("code_challenge_method", "plain"))
        owner.codes[code] = Code(
            code,
            request.client.client_id,
            data.get("redirect_uri", ""),
            request.client.get_allowed_scope(data.get("scope", "")),
            data.get("resource", ""),
            data.get("code_challenge", ""),
            data.get("code_challenge_method", "plain"),
        )

    def query_authorization_code(self, code: str, client: Client) -> Code | None:
        found = self.server.owner.codes.get(code)  # type: ignore[attr-defined]
        return found if found is not None and found.client_id == client.client_id else None

    def delete_authorization_code(self, authorization_code: Code) -> None:
        self.server.owner.codes.pop(authorization_code.code, None)  # type: ignore[attr-defined]

    def authenticate_user(self, authorization_code: Code) -> User:
        return self.server.owner.user  # type: ignore[attr-defined]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class OAuthServer:
    """Start with `OAuthServer.start()`; `issuer` is its URL; `stop()` ends it."""

    def __init__(self, alg: str = "RS256", oidc_only: bool = False):
        self.alg = alg
        self.oidc_only = oidc_only  # metadata only at OpenID Connect's well-known path
        self.down = False  # answer every request 503
        self.keys: list[RSAKey | ECKey] = []
        self.current = self._new_key()
        self.clients: dict[str, Client] = {}
        self.codes: dict[str, Code] = {}
        self.issued: list[dict[str, Any]] = []
        self.user = User("alice", ["alice"])
        self.requests: list[str] = []
        self.challenge_methods: list[str] = []  # the PKCE method of each authorization request
        self._lock = threading.Lock()
        self.authz = _Server(self)
        self.authz.register_grant(_CodeGrant, [CodeChallenge(required=True)])
        self.authz.register_token_generator(
            "default",
            BearerTokenGenerator(access_token_generator=self._access_token, expires_generator=lambda c, g: 600),
        )
        self._resource = ""
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.issuer = f"http://127.0.0.1:{self.http.server_address[1]}"
        self._thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @classmethod
    def start(cls, alg: str = "RS256", oidc_only: bool = False) -> OAuthServer:
        server = cls(alg, oidc_only)
        server._thread.start()
        return server

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    # -- keys and tokens --
    def _new_key(self) -> RSAKey | ECKey:
        kid = secrets.token_hex(4)
        key: RSAKey | ECKey
        if self.alg.startswith("ES"):
            key = ECKey.generate_key("P-256", parameters={"kid": kid, "use": "sig", "alg": self.alg})
        else:
            key = RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": self.alg})
        self.keys.append(key)
        return key

    def rotate(self) -> str:
        """A new signing key, published beside the old ones; returns its kid."""
        self.current = self._new_key()
        return str(self.current.kid)

    def drop(self, kid: str) -> None:
        self.keys = [k for k in self.keys if k.kid != kid]

    def jwks(self) -> dict[str, Any]:
        return KeySet(self.keys).as_dict(private=False)

    def claims(self, audience: str, scope: str, tenants: Any = None, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        out = {"iss": self.issuer, "sub": self.user.sub, "aud": audience, "iat": now, "exp": now + 600, "scope": scope}
        out[TENANT_CLAIM] = self.user.tenants if tenants is None else tenants
        out.update(extra)
        return out

    def sign(self, claims: dict[str, Any], key: RSAKey | ECKey | None = None) -> str:
        key = key or self.current
        return jose_jwt.encode({"alg": self.alg, "kid": key.kid, "typ": "at+jwt"}, claims, key)

    def unsigned(self, claims: dict[str, Any]) -> str:
        """`alg: none`: no signature at all."""
        head = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
        return f"{head}.{_b64(json.dumps(claims).encode())}."

    def hs256_with_public_key(self, claims: dict[str, Any]) -> str:
        """HS256 "signed" with the published public key (PEM) as the HMAC secret: the
        algorithm-confusion attack on a verifier that trusts the header's alg."""
        secret = self.current.as_pem(private=False)
        head = _b64(json.dumps({"alg": "HS256", "kid": self.current.kid, "typ": "JWT"}).encode())
        body = _b64(json.dumps(claims).encode())
        mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(mac)}"

    def _access_token(self, client: Client, grant_type: str, user: User, scope: str) -> str:
        return self.sign(self.claims(self._resource, scope, client_id=client.client_id))

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": ["read:memory", "write:memory", "admin"],
        }

    # -- HTTP --
    def _handle(self, method: str, path: str, query: dict[str, str], form: dict[str, str], headers: dict[str, str]):
        self.requests.append(path)
        if self.down:
            return 503, {"error": "temporarily_unavailable"}, []
        if path == (
            "/.well-known/openid-configuration" if self.oidc_only else "/.well-known/oauth-authorization-server"
        ):
            return 200, self.metadata(), []
        if path == "/jwks":
            return 200, self.jwks(), []
        uri = f"{self.issuer}{path}"
        request = _Request(method, uri, headers, query, form)
        with self._lock:
            if path == "/authorize":
                # Auto-consent: the one user grants what the client asks for.
                grant = self.authz.get_consent_grant(request, end_user=self.user)
                return self.authz.create_authorization_response(request, grant_user=self.user, grant=grant)
            if path == "/token":
                self._resource = form.get("resource", "")
                return self.authz.create_token_response(request)
        return 404, {"error": "not_found"}, []

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, method: str) -> None:
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                form = {k: v[0] for k, v in parse_qs(body).items()}
                status, payload, headers = owner._handle(method, parts.path, query, form, dict(self.headers))
                data = b"" if payload in (None, "") else json.dumps(payload).encode()
                self.send_response(status)
                names = set()
                for name, value in headers or []:
                    names.add(name.lower())
                    self.send_header(name, value)
                if data and "content-type" not in names:
                    self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

        return Handler
