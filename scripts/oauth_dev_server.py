"""A local OAuth 2.1 authorization server, for trying memsvc's OAuth on one machine and for
the tests: FOR TRYING OAUTH LOCALLY AND TESTING ONLY, NEVER FOR PRODUCTION. It binds loopback
only, keeps everything in memory, consents for its one user without asking, and signs with
keys it makes at start-up. A real deployment points memsvc at its identity provider instead.

    .venv/bin/python scripts/oauth_dev_server.py --port 9000 --tenants alice

It is authlib's RFC 6749 AuthorizationServer over the standard library's HTTP server, so the
tests (tests/support/oauth_server.py loads this file) and a person trying the README run the
same code:

- `/.well-known/oauth-authorization-server` (RFC 8414) and `/jwks` (its public keys);
- `/authorize`: the authorization-code grant with PKCE (RFC 7636, S256 required); it consents
  at once for the one user (an agent's browser would show a page) and redirects to the
  client's redirect URI with the code;
- `/token`: the code (with its verifier), or a confidential client's id and secret (the
  client_credentials grant: one curl gets a token), for a JWT access token (RS256 or ES256,
  signed by the current key, `kid` in the header) whose `aud` is the `resource` parameter
  (RFC 8707), `sub` the user, with the granted scopes and the tenant claim.

`main()` registers a public client (`memsvc-dev`, redirect URIs on loopback, any port as RFC
8252 allows) and a confidential one (`memsvc-dev-service`). The tests' hooks: `sign(claims)`
issues a token directly (for the refusal tests), `unsigned` and `hs256_with_public_key` forge
the attacks, `rotate()` adds a new key and signs with it, `drop(kid)` stops publishing a key,
`down` answers 503, and `requests`, `challenge_methods`, `issued` record what happened.
Nothing here is memsvc's code.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import ipaddress
import json
import secrets
import signal
import socket
import sys
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
SCOPES = ["read:memory", "write:memory", "admin"]
PUBLIC_CLIENT = "memsvc-dev"
SERVICE_CLIENT = "memsvc-dev-service"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
SECRET_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
Answer = tuple[int, Any, Any]  # status, JSON body, headers


def _loopback(host: str | None) -> bool:
    """Whether a host name or address is this machine only (RFC 8252's loopback redirects)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


@dataclass
class Client(ClientMixin):
    """A registered client: public (no secret; authorization code with PKCE) or confidential
    (a secret; client_credentials)."""

    client_id: str
    redirect_uris: list[str]
    scope: str = "read:memory write:memory admin"
    client_secret: str = ""

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        allowed = set(self.scope.split())
        return " ".join(s for s in (scope or "").split() if s in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        """Exactly a registered URI, or a loopback one on any port (RFC 8252 section 7.3:
        a native app listens on whatever port is free)."""
        if redirect_uri in self.redirect_uris:
            return True
        asked = urlsplit(redirect_uri)
        if asked.scheme != "http" or not _loopback(asked.hostname):
            return False
        return any(
            registered.scheme == "http" and (registered.hostname, registered.path) == (asked.hostname, asked.path)
            for registered in map(urlsplit, self.redirect_uris)
        )

    def check_client_secret(self, client_secret: str) -> bool:
        return bool(self.client_secret) and hmac.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in SECRET_AUTH_METHODS if self.client_secret else method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code" and not self.client_secret

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == ("client_credentials" if self.client_secret else "authorization_code")


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
        super().__init__(scopes_supported=list(SCOPES))
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

    @property
    def owner(self) -> OAuthServer:
        owner: OAuthServer = self.server.owner
        return owner

    def save_authorization_code(self, code: str, request: Any) -> None:
        data = request.payload.data
        owner = self.owner
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
        found = self.owner.codes.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    def delete_authorization_code(self, authorization_code: Code) -> None:
        self.owner.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code: Code) -> User:
        return self.owner.user


class _ServiceGrant(grants.ClientCredentialsGrant):
    """client_credentials, with the secret in the form (what one curl sends) or in Basic."""

    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = SECRET_AUTH_METHODS


class _HTTPServerV6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class OAuthServer:
    """Start with `OAuthServer.start()`; `issuer` is its URL; `stop()` ends it."""

    def __init__(self, alg: str = "RS256", oidc_only: bool = False, host: str = "127.0.0.1", port: int = 0):
        if not _loopback(host):
            raise ValueError(f"the development authorization server binds loopback only, not {host!r}")
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
        self.authz.register_grant(_ServiceGrant)
        self.authz.register_token_generator(
            "default",
            BearerTokenGenerator(access_token_generator=self._access_token, expires_generator=lambda c, g: 600),
        )
        self._resource = ""
        self.http = (_HTTPServerV6 if ":" in host else ThreadingHTTPServer)((host, port), self._handler())
        self.port = int(self.http.server_address[1])
        self.issuer = f"http://{f'[{host}]' if ':' in host else host}:{self.port}"
        self._thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @classmethod
    def start(cls, alg: str = "RS256", oidc_only: bool = False, host: str = "127.0.0.1", port: int = 0) -> OAuthServer:
        server = cls(alg, oidc_only, host, port)
        server.serve_in_background()
        return server

    def serve_in_background(self) -> None:
        self._thread.start()

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
        return dict(KeySet([*self.keys]).as_dict(private=False))

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

    def _access_token(self, client: Client, grant_type: str, user: User | None, scope: str) -> str:
        return self.sign(self.claims(self._resource, scope, client_id=client.client_id))

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", *SECRET_AUTH_METHODS],
            "scopes_supported": list(SCOPES),
        }

    # -- HTTP --
    def _handle(
        self, method: str, path: str, query: dict[str, str], form: dict[str, str], headers: dict[str, str]
    ) -> Answer:
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
                answer: Answer = self.authz.create_authorization_response(request, grant_user=self.user, grant=grant)
                return answer
            if path == "/token":
                self._resource = form.get("resource", "")
                answer = self.authz.create_token_response(request)
                return answer
        return 404, {"error": "not_found"}, []

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
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


# -- the command a person runs --


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="A local OAuth 2.1 authorization server for trying memsvc's OAuth and for tests "
        "(loopback only; never for production)."
    )
    parser.add_argument("--host", default="127.0.0.1", help="a loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9000, help="the port to listen on (default 9000)")
    parser.add_argument(
        "--issuer", help="the issuer URL tokens carry in iss (default http://localhost:<port> on 127.0.0.1)"
    )
    parser.add_argument("--sub", default="alice", help="the user every token is issued for (default alice)")
    parser.add_argument(
        "--tenants", help="comma-separated apiKeyIds the tokens name in memsvc_tenants ('*' for all; default: the sub)"
    )
    parser.add_argument("--alg", choices=["RS256", "ES256"], default="RS256", help="the signing algorithm")
    parser.add_argument(
        "--client-secret", help=f"the secret of the confidential client {SERVICE_CLIENT} (default: a random one)"
    )
    return parser.parse_args(argv)


def register_dev_clients(server: OAuthServer, client_secret: str) -> None:
    """The two clients a person needs: a public one for the authorization-code flow (an MCP
    client, an agent) with redirect URIs on loopback, and a confidential one for
    client_credentials (a shell, a service)."""
    server.clients[PUBLIC_CLIENT] = Client(
        PUBLIC_CLIENT, ["http://127.0.0.1/callback", "http://localhost/callback", "http://[::1]/callback"]
    )
    server.clients[SERVICE_CLIENT] = Client(SERVICE_CLIENT, [], client_secret=client_secret)


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C or SIGTERM."""
    args = _arguments(argv)
    try:
        server = OAuthServer(args.alg, host=args.host, port=args.port)
    except (ValueError, OSError) as exc:
        print(f"oauth_dev_server: {exc}", file=sys.stderr)
        return 2
    if args.issuer or args.host in ("127.0.0.1", "localhost"):  # the name the docs use, else the address bound
        server.issuer = (args.issuer or f"http://localhost:{server.port}").rstrip("/")
    tenants = [t.strip() for t in args.tenants.split(",") if t.strip()] if args.tenants else [args.sub]
    server.user = User(args.sub, tenants)
    secret = args.client_secret or secrets.token_urlsafe(24)
    register_dev_clients(server, secret)
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    print(  # before serving: whoever waits for the metadata to answer has this line by then
        f"oauth_dev_server (for trying OAuth locally and testing, never production): issuer {server.issuer} "
        f"on {args.host}:{server.port}; public client {PUBLIC_CLIENT} (authorization code + PKCE, loopback "
        f"redirect URIs); confidential client {SERVICE_CLIENT}, secret {secret} (client_credentials); "
        f"tokens for sub {server.user.sub} with {TENANT_CLAIM} {','.join(server.user.tenants)}",
        flush=True,
    )
    server.serve_in_background()
    while not stopping.wait(0.5):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
